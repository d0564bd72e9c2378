// GPT-2's forward pass and generation, once per handler in OSPREY_TESTED_HANDLERS.
#pragma once

#ifndef OSPREY_TESTED_HANDLERS
#error "define OSPREY_TESTED_HANDLERS (e.g. ::osprey::Lists, ::osprey::GpuHost) before including this header"
#endif

#include <gtest/gtest.h>

#include "gpt2/model_cases.hpp"
#include "handlers.hpp"

namespace gpt2::testing {

template <class H>
using Gpt2ModelTest = osprey::testing::HandlerTest<H>;

using Gpt2ModelHandlers = ::testing::Types<OSPREY_TESTED_HANDLERS>;
TYPED_TEST_SUITE(Gpt2ModelTest, Gpt2ModelHandlers, osprey::testing::HandlerNames);

TYPED_TEST(Gpt2ModelTest, CachedLogitsEqualTheFullPassBitForBit) { cachedLogitsEqualFullPass(this->handler); }
TYPED_TEST(Gpt2ModelTest, CachedGenerationEqualsFullRecomputation) { cachedGenerationEqualsRecompute(this->handler); }
TYPED_TEST(Gpt2ModelTest, GreedyTokenIsTheFirstMaximum) { greedyTokenIsTheFirstMaximum(this->handler); }
TYPED_TEST(Gpt2ModelTest, LivelyGenerationVariesAndIsTheReferences) {
  livelyGenerationVariesAndIsTheReferences(this->handler);
}
TYPED_TEST(Gpt2ModelTest, GenerationChecksTheContext) { generationChecksTheContext(this->handler); }

}  // namespace gpt2::testing
