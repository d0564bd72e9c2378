// Sampled generation on the cuda device (a GPU machine: scripts/gpu-check.sh runs this binary):
// gpu/cuda draws the same tokens as lists, bit for bit, for every setting the host suite compares
// lists and gpu/host with; the fast handler takes the sampling options (its logits row read back),
// top-k 1 is its greedy decoding, and its seed decides its tokens.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "gpt2/fast/fast_handler.hpp"
#include "handlers.hpp"
#include "sampling/sampled_generation_cases.hpp"

namespace gpt2::testing {
namespace {

TEST(SampledGenerationCuda, ListsAndGpuCudaSampleTheSameTokens) {
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuCuda cuda = osprey::testing::makeHandler<osprey::GpuCuda>();
  const auto w1 = tinyOn(lists);
  const auto w2 = tinyOn(cuda);
  for (const auto& s : crossHandlerSettings()) {
    const auto a = tinyTokens(lists, w1, kPrompt, 20, s);
    const auto b = tinyTokens(cuda, w2, kPrompt, 20, s);
    ASSERT_EQ(a.size(), 20u);
    EXPECT_EQ(a, b) << "temperature " << s.temperature << ", top-k " << s.topK << ", top-p " << s.topP;
  }
}

FastHandler makeFastHandler() {
  auto f = osprey::Fast::open();
  if (!f.ok()) throw std::runtime_error(f.error().message);
  return FastHandler(std::move(*f));
}

TEST(SampledGenerationCuda, FastTakesTheSamplingOptions) {
  FastHandler h = makeFastHandler();
  const auto w = tinyOn(h);
  const auto greedy = tinyTokens(h, w, kPrompt, 20, sampledAt(0.0, 1337));  // the recorded decoding graph
  EXPECT_EQ(tinyTokens(h, w, kPrompt, 20, sampledAt(1.0, 1337, 1)), greedy);  // top-k 1: the largest logit
  const auto sampled = tinyTokens(h, w, kPrompt, 20, sampledAt(1.0, 1337));
  EXPECT_NE(sampled, greedy);
  EXPECT_EQ(tinyTokens(h, w, kPrompt, 20, sampledAt(1.0, 1337)), sampled);
  EXPECT_NE(tinyTokens(h, w, kPrompt, 20, sampledAt(1.0, 1338)), sampled);
}

}  // namespace
}  // namespace gpt2::testing
