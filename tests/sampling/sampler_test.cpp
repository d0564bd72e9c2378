// The sampler's definition (gpt2/sampling/sampling.hpp), checked on rows small enough to work out
// by hand: the order and tie-break, top-k, top-p, the inverse transform against Philox's uniform,
// the frequencies it draws, and the errors for settings out of range and logits that are not finite.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpt2/sampling/sampling.hpp"

namespace gpt2::sampling {
namespace {

SamplingSettings at(double temperature, osprey::Index topK = 0, double topP = 1.0, std::uint64_t seed = 1337) {
  SamplingSettings s;
  s.temperature = temperature;
  s.topK = topK;
  s.topP = topP;
  s.seed = seed;
  return s;
}

int draw(const std::vector<double>& logits, const SamplingSettings& s, std::uint64_t position) {
  auto t = sampleToken(std::span<const double>(logits), s, position);
  if (!t.ok()) throw std::runtime_error(t.error().message);
  return *t;
}

std::string errorOf(const SamplingSettings& s) {
  auto r = checkSampling(s);
  return r.ok() ? std::string("(accepted)") : r.error().message;
}

// Two equal logits: weights 1 and 1, running sums 1 and 2, so the token is 0 exactly when u·2 < 1.
TEST(Sampler, TwoEqualLogitsSplitAtOneHalfOfTheUniform) {
  int ones = 0;
  for (std::uint64_t t = 0; t < 200; ++t) {
    const int token = draw({0.25, 0.25}, at(1.0), t);
    EXPECT_EQ(token, uniformAt(1337, t) * 2.0 < 1.0 ? 0 : 1) << "position " << t;
    ones += token;
  }
  EXPECT_GT(ones, 70);  // both tokens come up (about 100 each)
  EXPECT_LT(ones, 130);
}

// Ties are ordered by index, so top-k 1 among equal logits is the first of them.
TEST(Sampler, TopKOneIsTheFirstLargestLogit) {
  const std::vector<double> logits{0.5, 2.0, -1.0, 2.0, 1.9};
  for (std::uint64_t t = 0; t < 50; ++t) EXPECT_EQ(draw(logits, at(1.0, 1), t), 1);
  // With top-k 2 the two tied logits are kept, and nothing else.
  for (std::uint64_t t = 0; t < 50; ++t) {
    const int token = draw(logits, at(3.0, 2), t);
    EXPECT_TRUE(token == 1 || token == 3) << token;
  }
}

// Top-p keeps the shortest prefix holding p of the weight: with weights e^0 = 1 and e^-20 the first
// token alone holds more than 0.999; and p = 1 keeps everything.
TEST(Sampler, TopPCutsTheUnlikelyTail) {
  const std::vector<double> logits{-20.0, 0.0, -20.0};
  for (std::uint64_t t = 0; t < 100; ++t) EXPECT_EQ(draw(logits, at(1.0, 0, 0.999), t), 1);
  // Temperature 100 flattens the row: p = 1 lets every token through.
  std::vector<int> counts(3);
  for (std::uint64_t t = 0; t < 3000; ++t) ++counts[static_cast<std::size_t>(draw(logits, at(100.0), t))];
  for (int c : counts) EXPECT_GT(c, 700);
  // The cut is by running sum in the sorted order: p = 0.5 of weights (1, 1, e^-0.2) keeps
  // {0, 1} (running sums 1, 2 against a threshold of 0.5 * 2.82: the second reaches it).
  for (std::uint64_t t = 0; t < 100; ++t) EXPECT_NE(draw({0.0, 0.0, -0.2}, at(1.0, 0, 0.5), t), 2);
}

// Frequencies follow the softmax: logits (0, ln 3) give token 1 three times in four.
TEST(Sampler, DrawsFollowTheSoftmax) {
  const std::vector<double> logits{0.0, std::log(3.0)};
  int ones = 0;
  const int n = 20000;
  for (int t = 0; t < n; ++t) ones += draw(logits, at(1.0), static_cast<std::uint64_t>(t));
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.015);  // sd 0.003
  // Temperature 2 halves the logits: weights 1 and sqrt(3), token 1 with probability 0.634.
  ones = 0;
  for (int t = 0; t < n; ++t) ones += draw(logits, at(2.0), static_cast<std::uint64_t>(t));
  EXPECT_NEAR(static_cast<double>(ones) / n, std::sqrt(3.0) / (1.0 + std::sqrt(3.0)), 0.015);
}

TEST(Sampler, MinusInfinityIsNeverDrawnAndSeedsChangeTheDraws) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const std::vector<double> logits{ninf, 0.0, ninf, 0.0};
  int differ = 0;
  for (std::uint64_t t = 0; t < 100; ++t) {
    const int a = draw(logits, at(1.0, 0, 1.0, 1), t);
    const int b = draw(logits, at(1.0, 0, 1.0, 2), t);
    EXPECT_TRUE(a == 1 || a == 3);
    EXPECT_TRUE(b == 1 || b == 3);
    differ += a != b;
  }
  EXPECT_GT(differ, 20);
}

TEST(Sampler, LogitsThatAreNotFiniteAreErrorsNamingTheToken) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto bad = sampleToken(std::vector<double>{0.0, nan, 1.0}, at(1.0), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("logit 1 is nan"), std::string::npos) << bad.error().message;
  auto infinite = sampleToken(std::vector<double>{0.0, 1.0, inf}, at(1.0), 0);
  ASSERT_FALSE(infinite.ok());
  EXPECT_NE(infinite.error().message.find("logit 2 is inf"), std::string::npos) << infinite.error().message;
  auto allMinus = sampleToken(std::vector<double>{-inf, -inf}, at(1.0), 0);
  ASSERT_FALSE(allMinus.ok());
  EXPECT_NE(allMinus.error().message.find("every logit is -inf"), std::string::npos);
  // A temperature so small that logit / temperature overflows.
  auto overflow = sampleToken(std::vector<double>{1e10, 0.0}, at(1e-300), 0);
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.error().message.find("overflows"), std::string::npos) << overflow.error().message;
  EXPECT_FALSE(sampleToken(std::vector<double>{}, at(1.0), 0).ok());
}

TEST(Sampler, SettingsOutOfRangeAreWordedAsOptions) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(checkSampling(at(0.0)).ok());
  EXPECT_TRUE(checkSampling(at(0.7, 40, 0.95)).ok());
  EXPECT_TRUE(checkSampling(at(1.0, 0, 1.0, ~std::uint64_t{0})).ok());
  EXPECT_NE(errorOf(at(-1.0)).find("--temperature -1"), std::string::npos) << errorOf(at(-1.0));
  EXPECT_NE(errorOf(at(inf)).find("--temperature inf"), std::string::npos);
  EXPECT_NE(errorOf(at(nan)).find("--temperature nan"), std::string::npos);
  EXPECT_NE(errorOf(at(1.0, -1)).find("--top-k -1"), std::string::npos);
  EXPECT_NE(errorOf(at(1.0, 0, 0.0)).find("--top-p 0"), std::string::npos);
  EXPECT_NE(errorOf(at(1.0, 0, 1.5)).find("--top-p 1.5"), std::string::npos);
  EXPECT_NE(errorOf(at(1.0, 0, nan)).find("--top-p nan"), std::string::npos);
  // top-k and top-p without sampling would be ignored: an error that says what to add.
  EXPECT_NE(errorOf(at(0.0, 5)).find("give --temperature"), std::string::npos) << errorOf(at(0.0, 5));
  EXPECT_NE(errorOf(at(0.0, 0, 0.9)).find("give --temperature"), std::string::npos);
}

}  // namespace
}  // namespace gpt2::sampling
