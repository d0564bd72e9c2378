// GPT-2 (tiny preset) on the host handlers: each handler on its own (typed), and lists against
// gpu/host bit for bit (logits of every position, 20 greedy tokens); and the 124M model's logits,
// lists against gpu/host, at the real widths (768, 2304, 3072 and 50257 columns).
#include <gtest/gtest.h>

#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::Lists, ::osprey::GpuHost
#include "gpt2/model_typed_tests.hpp"

namespace gpt2::testing {
namespace {

TEST(Gpt2CrossHandler, ListsAndGpuHostAgreeBitForBit) {
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  handlersAgreeBitForBit(lists, host);
}

// Every logit of every position of the prompt under GPT-2 124M (its deterministic initialisation):
// 5 x 50257 doubles, compared as bits. The products here take the host device's packed SIMD
// kernels at every real width, and the lm head's 50257 columns end in a partial column tile.
TEST(Gpt2CrossHandler, The124MLogitsAgreeBitForBitOnListsAndGpuHost) {
  const HostWeights weights = initialWeights(kGpt2_124M, kDefaultSeed);
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  logitsAgreeBitForBit(lists, host, weights, kPrompt);
}

}  // namespace
}  // namespace gpt2::testing
