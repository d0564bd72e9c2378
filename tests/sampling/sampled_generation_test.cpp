// Sampled generation on the tiny model (and 124M): lists and gpu/host draw the same tokens (their logits are
// the same doubles, and the draw is host arithmetic on them), sampling at temperature 1 is not
// greedy decoding, the seed decides the tokens, and a position's draw does not depend on the draws
// before it (a continuation restarted from its middle goes on with the same tokens).
#include <gtest/gtest.h>

#include "handlers.hpp"
#include "sampling/sampled_generation_cases.hpp"

namespace gpt2::testing {
namespace {

struct TinySampling : ::testing::Test {
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  ForwardWeights<osprey::Lists> w = tinyOn(lists);
};

TEST(SampledGeneration, ListsAndGpuHostSampleTheSameTokens) {
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  const auto w1 = tinyOn(lists);
  const auto w2 = tinyOn(host);
  for (const auto& s : crossHandlerSettings()) {
    const auto a = tinyTokens(lists, w1, kPrompt, 20, s);
    const auto b = tinyTokens(host, w2, kPrompt, 20, s);
    ASSERT_EQ(a.size(), 20u);
    EXPECT_EQ(a, b) << "temperature " << s.temperature << ", top-k " << s.topK << ", top-p " << s.topP;
  }
}

// GPT-2 124M (its deterministic initialisation): three tokens sampled from 50257-wide rows at the
// real widths, lists against gpu/host, top-k and top-p both cutting.
TEST(SampledGeneration, The124MModelSamplesTheSameTokensOnListsAndGpuHost) {
  const HostWeights weights = initialWeights(kGpt2_124M, kDefaultSeed);
  const auto sampled = [&](auto& h) {
    auto w = upload(h, weights);
    if (!w.ok()) throw std::runtime_error(w.error().message);
    auto f = prepareForward(h, std::move(*w));
    if (!f.ok()) throw std::runtime_error(f.error().message);
    return tinyTokens(h, *f, kPrompt, 3, sampledAt(1.0, 2026, 200, 0.9));
  };
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  const auto a = sampled(lists);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a, sampled(host));
}

TEST_F(TinySampling, TemperatureOneIsNotGreedyAndZeroIsGreedyUnchanged) {
  auto none = [](int) -> osprey::Result<void> { return {}; };
  const auto greedy = generateGreedy(lists, w, std::span<const int>(kPrompt), 20, none);
  ASSERT_TRUE(greedy.ok()) << greedy.error().message;
  EXPECT_EQ(tinyTokens(lists, w, kPrompt, 20, sampledAt(0.0, 1337)), *greedy);
  EXPECT_NE(tinyTokens(lists, w, kPrompt, 20, sampledAt(1.0, 1337)), *greedy);
  // Top-k 1 keeps the largest logit alone: greedy decoding again, whatever the temperature.
  EXPECT_EQ(tinyTokens(lists, w, kPrompt, 20, sampledAt(1.0, 1337, 1)), *greedy);
}

TEST_F(TinySampling, TheSeedDecidesTheTokens) {
  const auto a = tinyTokens(lists, w, kPrompt, 20, sampledAt(1.0, 42));
  EXPECT_EQ(tinyTokens(lists, w, kPrompt, 20, sampledAt(1.0, 42)), a);
  EXPECT_NE(tinyTokens(lists, w, kPrompt, 20, sampledAt(1.0, 43)), a);
}

// Restarting from the prompt plus the first k tokens drawn, the draws go on with the same tokens:
// the token at position t is drawn from (seed, t) and that position's logits alone, not from a
// stream that earlier draws advanced.
TEST_F(TinySampling, APositionsDrawDoesNotDependOnEarlierDraws) {
  const auto s = sampledAt(1.0, 5);
  const auto whole = tinyTokens(lists, w, kPrompt, 12, s);
  for (std::size_t k : {1u, 5u, 11u}) {
    std::vector<int> prompt = kPrompt;
    prompt.insert(prompt.end(), whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(k));
    const auto rest = tinyTokens(lists, w, prompt, static_cast<osprey::Index>(12 - k), s);
    EXPECT_EQ(rest, std::vector<int>(whole.begin() + static_cast<std::ptrdiff_t>(k), whole.end())) << "k = " << k;
  }
}

TEST_F(TinySampling, SettingsOutOfRangeStopGenerationBeforeAnyToken) {
  int streamed = 0;
  auto bad = generateTokens(lists, w, std::span<const int>(kPrompt), 3, sampledAt(1.0, 1, 0, 0.0),
                            [&](int) -> osprey::Result<void> {
                              ++streamed;
                              return {};
                            });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--top-p 0"), std::string::npos) << bad.error().message;
  EXPECT_EQ(streamed, 0);
}

}  // namespace
}  // namespace gpt2::testing
