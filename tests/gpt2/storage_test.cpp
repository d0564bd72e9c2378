// The model is written once against views that read every element as a double, not against
// buffers of doubles: on a handler whose buffers hold float (ListsOf<float>, the lists handler
// rounding each stored result to float) the forward pass, the cached decode and a training step
// compile and run, and land near the exact results. This is the property a fast handler with
// float or bfloat16 storage relies on; its own tolerances are measured on the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpt2/model_cases.hpp"
#include "gpt2/train/step.hpp"
#include "train/train_helpers.hpp"

namespace gpt2::testing {
namespace {

using Narrow = osprey::ListsOf<float>;

// The gaps measured on this machine: tiny's logits 9.1e-8 (full pass) and 7.7e-8 (cached step);
// the small model's loss 4.2e-8 and gradients 1.2e-8 (of sizes up to 0.079). The bounds below are
// about ten times those: float rounding (relative 6e-8 a stored value) accounts for them, and a
// layer reading a wrong element or a wrong type would miss by orders of magnitude.
constexpr Scalar kLogitGap = 1e-6, kLossGap = 1e-6, kGradientGap = 1e-7;

// The largest |a - b| over two equally long lists, and whether any element differs at all.
struct Gap {
  Scalar largest = 0.0;
  bool anyDifferent = false;
};
Gap gapBetween(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  Gap g;
  for (std::size_t i = 0; i < a.size(); ++i) {
    g.largest = std::max(g.largest, std::abs(a[i] - b[i]));
    g.anyDifferent = g.anyDifferent || a[i] != b[i];
  }
  return g;
}

TEST(FloatStorage, NamesItsStorage) {
  EXPECT_EQ(Narrow{}.device(), "lists (4-byte storage)");
  EXPECT_EQ(osprey::Lists{}.device(), "lists");
}

// Rounding each stored value to float through the tiny model's two blocks moves its logits a little;
// they must move (the storage is really float) and stay within kLogitGap.
TEST(FloatStorage, TinyLogitsNearExact) {
  osprey::Lists exact;
  Narrow narrow;
  const auto wExact = tinyOn(exact);
  const auto wNarrow = tinyOn(narrow);
  const auto want = fullLogits(exact, wExact, kPrompt);
  const auto got = fullLogits(narrow, wNarrow, kPrompt);
  ASSERT_EQ(got.size(), want.size());
  const Gap gap = gapBetween(got, want);
  EXPECT_TRUE(gap.anyDifferent) << "float storage gave the exact doubles: it is not storing floats";
  EXPECT_LT(gap.largest, kLogitGap);
  for (Scalar x : got) ASSERT_TRUE(std::isfinite(x));
}

// The cached step reads its caches through the same views: the last position's logits from
// prefill and one decode step stay as near the exact ones.
TEST(FloatStorage, CachedStepNearExact) {
  osprey::Lists exact;
  Narrow narrow;
  const auto wExact = tinyOn(exact);
  const auto wNarrow = tinyOn(narrow);
  const std::vector<int> prompt(kPrompt.begin(), kPrompt.end() - 1);
  const int one[1] = {kPrompt.back()};
  auto stepOf = [&](auto& h, const auto& w) {
    auto first = prefill(h, w, tokensOn(h, prompt), static_cast<Index>(prompt.size()));
    if (!first.ok()) throw std::runtime_error(first.error().message);
    auto next = decodeStep(h, w, first->cache, tokensOn(h, std::span<const int>(one)));
    if (!next.ok()) throw std::runtime_error(next.error().message);
    return osprey::testing::readAll(h, next->logits);
  };
  const Gap gap = gapBetween(stepOf(narrow, wNarrow), stepOf(exact, wExact));
  EXPECT_TRUE(gap.anyDifferent);
  EXPECT_LT(gap.largest, kLogitGap);
}

// A training step's loss and every gradient on float storage, against the exact step, on the
// small model of the training tests (width 16, 2 blocks, V 64; a batch of 3 x 7).
TEST(FloatStorage, TrainingStepNearExact) {
  using namespace osprey::testing::train;
  osprey::Lists exact;
  Narrow narrow;
  const HostWeights host = smallWeights();
  const data::Batch batch = smallBatch(3, 7, kSmall.V);
  auto gradientsOf = [&](auto& h) {
    auto w = upload(h, host);
    if (!w.ok()) throw std::runtime_error(w.error().message);
    auto g = train::batchGradients(h, *w, batch, 0);
    if (!g.ok()) throw std::runtime_error(g.error().message);
    return std::make_pair(g->loss, allValues(h, g->grads));
  };
  const auto [lossExact, gradsExact] = gradientsOf(exact);
  const auto [lossNarrow, gradsNarrow] = gradientsOf(narrow);
  EXPECT_NE(lossNarrow, lossExact);
  EXPECT_LT(std::abs(lossNarrow - lossExact), kLossGap);
  ASSERT_EQ(gradsNarrow.size(), gradsExact.size());
  const auto specs = parameterSpecs(kSmall);
  for (std::size_t t = 0; t < gradsExact.size(); ++t)
    EXPECT_LT(gapBetween(gradsNarrow[t], gradsExact[t]).largest, kGradientGap) << specs[t].name;
}

}  // namespace
}  // namespace gpt2::testing
