// The width-4 block, once per handler in OSPREY_TESTED_HANDLERS (see block_cases.hpp).
#pragma once

#ifndef OSPREY_TESTED_HANDLERS
#error "define OSPREY_TESTED_HANDLERS (e.g. ::osprey::Lists, ::osprey::GpuHost) before including this header"
#endif

#include <gtest/gtest.h>

#include "block/block_cases.hpp"
#include "handlers.hpp"

namespace osprey::testing {

template <class H>
using BlockTest = HandlerTest<H>;

using BlockHandlers = ::testing::Types<OSPREY_TESTED_HANDLERS>;
TYPED_TEST_SUITE(BlockTest, BlockHandlers, HandlerNames);

TYPED_TEST(BlockTest, OutputsMatchTheGolden) { block_cases::outputsMatchTheGolden(this->handler); }
TYPED_TEST(BlockTest, WrongParameterShapeIsAnError) { block_cases::wrongParameterShapeIsAnError(this->handler); }

}  // namespace osprey::testing
