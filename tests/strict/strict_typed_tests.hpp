// Strict faults inside kernels, once per handler in OSPREY_TESTED_HANDLERS (see strict_cases.hpp).
#pragma once

#ifndef OSPREY_TESTED_HANDLERS
#error "define OSPREY_TESTED_HANDLERS (e.g. ::osprey::Lists, ::osprey::GpuHost) before including this header"
#endif

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "strict/strict_cases.hpp"

namespace osprey::testing {

template <class H>
using StrictKernelTest = HandlerTest<H>;

using StrictHandlers = ::testing::Types<OSPREY_TESTED_HANDLERS>;
TYPED_TEST_SUITE(StrictKernelTest, StrictHandlers, HandlerNames);

TYPED_TEST(StrictKernelTest, BuildReturnsDivisionByZeroOfOneElement) {
  strict_cases::buildReturnsDivisionByZeroOfOneElement(this->handler);
}
TYPED_TEST(StrictKernelTest, BuildReturnsOverflowOfOneElement) {
  strict_cases::buildReturnsOverflowOfOneElement(this->handler);
}
TYPED_TEST(StrictKernelTest, HandlerRecoversAfterAKernelFault) {
  strict_cases::handlerRecoversAfterAKernelFault(this->handler);
}
TYPED_TEST(StrictKernelTest, ZipWithReturnsRemainderByZero) {
  strict_cases::zipWithReturnsRemainderByZero(this->handler);
}
TYPED_TEST(StrictKernelTest, IndexMathAcrossThirtyTwoBitsIsExact) {
  strict_cases::indexMathAcrossThirtyTwoBitsIsExact(this->handler);
}
TYPED_TEST(StrictKernelTest, ReduceReturnsUnderflow) { strict_cases::reduceReturnsUnderflow(this->handler); }
TYPED_TEST(StrictKernelTest, StrictlyStopsTheModelAtAKernelFault) {
  strict_cases::strictlyStopsTheModelAtAKernelFault(this->handler);
}
TYPED_TEST(StrictKernelTest, StrictlyStopsTheModelAtAHostFault) {
  strict_cases::strictlyStopsTheModelAtAHostFault(this->handler);
}

}  // namespace osprey::testing
