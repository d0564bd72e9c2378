// The effect's typed tests: every operation, once per handler in OSPREY_TESTED_HANDLERS.
//
// A test binary defines OSPREY_TESTED_HANDLERS (a comma-separated list of handler types) and
// includes this header; effect_host_test.cpp does so for lists and gpu/host, and the cuda test
// binary for gpu/cuda. The bodies only call the cases in effect_cases.hpp, which hold the kernels.
#pragma once

#ifndef OSPREY_TESTED_HANDLERS
#error "define OSPREY_TESTED_HANDLERS (e.g. ::osprey::Lists, ::osprey::GpuHost) before including this header"
#endif

#include <gtest/gtest.h>

#include "effect/effect_cases.hpp"
#include "handlers.hpp"

namespace osprey::testing {

template <class H>
using EffectTest = HandlerTest<H>;

using EffectHandlers = ::testing::Types<OSPREY_TESTED_HANDLERS>;
TYPED_TEST_SUITE(EffectTest, EffectHandlers, HandlerNames);

// build, length, get
TYPED_TEST(EffectTest, BuildOnAwkwardSizes) { effect_cases::buildOnAwkwardSizes(this->handler); }
TYPED_TEST(EffectTest, BuildKernelReadsAView) { effect_cases::buildKernelReadsAView(this->handler); }
TYPED_TEST(EffectTest, BuildEachEqualsSeparateBuilds) { effect_cases::buildEachEqualsSeparateBuilds(this->handler); }
TYPED_TEST(EffectTest, BuildRejectsNegativeLength) { effect_cases::buildRejectsNegativeLength(this->handler); }
TYPED_TEST(EffectTest, GetReadsEachPosition) { effect_cases::getReadsEachPosition(this->handler); }
TYPED_TEST(EffectTest, GetOutOfRangeFaults) { effect_cases::getOutOfRangeFaults(this->handler); }

// zipWith
TYPED_TEST(EffectTest, ZipWithOnAwkwardSizes) { effect_cases::zipWithOnAwkwardSizes(this->handler); }
TYPED_TEST(EffectTest, ZipWithRejectsLengthMismatch) { effect_cases::zipWithRejectsLengthMismatch(this->handler); }

// reduce
TYPED_TEST(EffectTest, ReduceFoldsInElementOrder) { effect_cases::reduceFoldsInElementOrder(this->handler); }
TYPED_TEST(EffectTest, ReduceOfEmptyIsSeed) { effect_cases::reduceOfEmptyIsSeed(this->handler); }

// indexOf
TYPED_TEST(EffectTest, IndexOfFindsFirstHit) { effect_cases::indexOfFindsFirstHit(this->handler); }
TYPED_TEST(EffectTest, IndexOfSmallestWinsAcrossRanges) { effect_cases::indexOfSmallestWinsAcrossRanges(this->handler); }
TYPED_TEST(EffectTest, IndexOfOnEmpty) { effect_cases::indexOfOnEmpty(this->handler); }
TYPED_TEST(EffectTest, IndexOfUsesIeeeEquality) { effect_cases::indexOfUsesIeeeEquality(this->handler); }

// matMul
TYPED_TEST(EffectTest, MatMulMatchesReferenceLoop) { effect_cases::matMulMatchesReferenceLoop(this->handler); }
TYPED_TEST(EffectTest, MatMulWithEmptyInnerIsZeros) { effect_cases::matMulWithEmptyInnerIsZeros(this->handler); }
TYPED_TEST(EffectTest, MatMulRejectsShapeMismatch) { effect_cases::matMulRejectsShapeMismatch(this->handler); }

// fromList, load, device
TYPED_TEST(EffectTest, FromListRoundTripsEveryBitPattern) { effect_cases::fromListRoundTripsEveryBitPattern(this->handler); }
TYPED_TEST(EffectTest, LoadOfMissingFileNamesTheFile) { effect_cases::loadOfMissingFileNamesTheFile(this->handler); }
TYPED_TEST(EffectTest, DeviceNamesTheHandler) { effect_cases::deviceNamesTheHandler(this->handler); }

}  // namespace osprey::testing
