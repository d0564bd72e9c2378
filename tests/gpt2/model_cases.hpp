// GPT-2's forward pass and greedy generation on the tiny preset, as free function templates
// over the handler (kernels may not live in gtest bodies under nvcc). Used by the typed tests
// (model_typed_tests.hpp) on every handler, and by the cross-handler comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "gpt2/model/generate.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/model/model.hpp"
#include "handlers.hpp"

namespace gpt2::testing {

using osprey::Index;
using osprey::Scalar;

// "The capital of France is" in GPT-2's tokenizer (DESIGN.md §5).
inline const std::vector<int> kPrompt{464, 3139, 286, 4881, 318};

// The tiny preset's initial weights with the default seed, made once per test binary.
inline const HostWeights& tinyWeights() {
  static const HostWeights weights = initialWeights(kGpt2Tiny, kDefaultSeed);
  return weights;
}

// Host weights on handler h, in the forward pass's layout.
template <class H>
ForwardWeights<H> forwardOn(H& h, const HostWeights& host) {
  auto w = upload(h, host);
  if (!w.ok()) throw std::runtime_error(w.error().message);
  auto f = prepareForward(h, std::move(*w));
  if (!f.ok()) throw std::runtime_error(f.error().message);
  return std::move(*f);
}

// The tiny model on handler h.
template <class H>
ForwardWeights<H> tinyOn(H& h) {
  return forwardOn(h, tinyWeights());
}

// The tiny preset with its position embeddings scaled up (x 200). Random initialisation alone
// gives degenerate continuations (one token over and over), under which "the same 20 tokens"
// cannot tell a decoding step that keeps the argmax from one that moves on; this model's greedy
// continuation moves from token to token with the position.
inline const HostWeights& livelyTinyWeights() {
  static const HostWeights weights = [] {
    HostWeights w = initialWeights(kGpt2Tiny, kDefaultSeed);
    for (Scalar& x : w.tensors[kWpeIndex].values) x *= 200.0;
    return w;
  }();
  return weights;
}

template <class H>
ForwardWeights<H> livelyTinyOn(H& h) {
  return forwardOn(h, livelyTinyWeights());
}

template <class H>
Buf<H> tokensOn(H& h, std::span<const int> ids) {
  auto b = tokenBuffer(h, ids);
  if (!b.ok()) throw std::runtime_error(b.error().message);
  return std::move(*b);
}

// logits (T, V) of every position of `ids`, on the host.
template <class H>
std::vector<Scalar> fullLogits(H& h, const ForwardWeights<H>& w, std::span<const int> ids) {
  auto logits = forwardLogits(h, w, tokensOn(h, ids), 1, static_cast<Index>(ids.size()));
  if (!logits.ok()) throw std::runtime_error(logits.error().message);
  return osprey::testing::readAll(h, *logits);
}

// The prefill's last-position logits are the full pass's last row, bit for bit; so are the
// logits of each cached step against the full pass over the longer sequence.
template <class H>
void cachedLogitsEqualFullPass(H& h) {
  const auto w = tinyOn(h);
  const Index V = w.config.V;
  std::vector<int> ids = kPrompt;
  auto first = prefill(h, w, tokensOn(h, ids), static_cast<Index>(ids.size()));
  ASSERT_TRUE(first.ok()) << first.error().message;
  StepOut<H> step = std::move(*first);
  for (int extra = 0; extra < 4; ++extra) {
    const auto full = fullLogits(h, w, ids);
    ASSERT_EQ(full.size(), ids.size() * static_cast<std::size_t>(V));
    const std::span<const Scalar> lastRow(full.data() + (ids.size() - 1) * V, static_cast<std::size_t>(V));
    const auto cached = osprey::testing::readAll(h, step.logits);
    ASSERT_TRUE(osprey::testing::sameBits(cached, lastRow))
        << "position " << ids.size() - 1 << ": first differing logit "
        << osprey::testing::firstBitDifference(cached, lastRow);
    const int next = 1000 + 977 * extra;  // arbitrary continuation tokens
    ids.push_back(next);
    const int one[1] = {next};
    auto grown = decodeStep(h, w, step.cache, tokensOn(h, std::span<const int>(one)));
    ASSERT_TRUE(grown.ok()) << grown.error().message;
    EXPECT_EQ(grown->cache.length, static_cast<Index>(ids.size()));
    step = std::move(*grown);
  }
}

// Greedy generation with the cache equals recomputing everything for every token.
template <class H>
void cachedGenerationEqualsRecompute(H& h) {
  const auto w = tinyOn(h);
  std::vector<int> streamed;
  auto cached = generateGreedy(h, w, std::span<const int>(kPrompt), 12, [&](int id) -> osprey::Result<void> {
    streamed.push_back(id);
    return {};
  });
  ASSERT_TRUE(cached.ok()) << cached.error().message;
  auto recomputed = generateGreedyRecompute(h, w, std::span<const int>(kPrompt), 12);
  ASSERT_TRUE(recomputed.ok()) << recomputed.error().message;
  EXPECT_EQ(*cached, *recomputed);
  EXPECT_EQ(streamed, *cached);  // every token was streamed, in order
  EXPECT_EQ(cached->size(), 12u);
}

// The logits are finite and the greedy token is their (first) maximum.
template <class H>
void greedyTokenIsTheFirstMaximum(H& h) {
  const auto w = tinyOn(h);
  auto step = prefill(h, w, tokensOn(h, kPrompt), static_cast<Index>(kPrompt.size()));
  ASSERT_TRUE(step.ok()) << step.error().message;
  const auto logits = osprey::testing::readAll(h, step->logits);
  ASSERT_EQ(static_cast<Index>(logits.size()), w.config.V);
  Index best = 0;
  for (Index v = 0; v < static_cast<Index>(logits.size()); ++v) {
    ASSERT_TRUE(std::isfinite(logits[v])) << "logit " << v;
    if (logits[v] > logits[best]) best = v;
  }
  auto token = greedyToken(h, step->logits);
  ASSERT_TRUE(token.ok()) << token.error().message;
  EXPECT_EQ(*token, best);
  // A tie goes to the smaller index: a buffer with two equal maxima.
  const std::vector<Scalar> tie{0.0, 3.0, -1.0, 3.0};
  auto tied = h.fromList(std::span<const Scalar>(tie));
  ASSERT_TRUE(tied.ok());
  auto tiedToken = greedyToken(h, *tied);
  ASSERT_TRUE(tiedToken.ok());
  EXPECT_EQ(*tiedToken, 1);
  // Logits that overflowed, or hold nothing to choose, pick no token: an error, never token 0 or
  // the first of several infinities.
  const Scalar inf = std::numeric_limits<Scalar>::infinity(), nan = std::numeric_limits<Scalar>::quiet_NaN();
  for (const std::vector<Scalar>& broken : {std::vector<Scalar>{1.0, inf, 2.0, inf}, std::vector<Scalar>{-inf, -inf},
                                            std::vector<Scalar>{nan, nan, nan}, std::vector<Scalar>{nan, -inf}}) {
    auto buffer = h.fromList(std::span<const Scalar>(broken));
    ASSERT_TRUE(buffer.ok());
    auto none = greedyToken(h, *buffer);
    ASSERT_FALSE(none.ok()) << "token " << *none;
    EXPECT_NE(none.error().message.find("not finite"), std::string::npos) << none.error().message;
  }
}

// Generation refuses what does not fit: an empty prompt, and a prompt + tokens beyond maxT.
template <class H>
void generationChecksTheContext(H& h) {
  const auto w = tinyOn(h);
  auto none = [](int) -> osprey::Result<void> { return {}; };
  auto empty = generateGreedy(h, w, std::span<const int>(), 3, none);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos) << empty.error().message;
  auto tooLong = generateGreedy(h, w, std::span<const int>(kPrompt), w.config.maxT, none);
  ASSERT_FALSE(tooLong.ok());
  EXPECT_NE(tooLong.error().message.find("do not fit the context of 128"), std::string::npos)
      << tooLong.error().message;
  auto exact = checkFitsContext(w.config, 5, w.config.maxT - 5);
  EXPECT_TRUE(exact.ok());
}

// On the lively model, 20 greedy tokens with the cache: not all alike (at least 8 different),
// equal to recomputing the whole sequence for every token, and equal to lists' (the reference's).
template <class H>
void livelyGenerationVariesAndIsTheReferences(H& h) {
  auto none = [](int) -> osprey::Result<void> { return {}; };
  const auto w = livelyTinyOn(h);
  auto cached = generateGreedy(h, w, std::span<const int>(kPrompt), 20, none);
  ASSERT_TRUE(cached.ok()) << cached.error().message;
  ASSERT_EQ(cached->size(), 20u);
  std::vector<int> distinct = *cached;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  EXPECT_GE(distinct.size(), 8u) << "the continuation is too uniform to test decoding";
  auto recomputed = generateGreedyRecompute(h, w, std::span<const int>(kPrompt), 20);
  ASSERT_TRUE(recomputed.ok()) << recomputed.error().message;
  EXPECT_EQ(*cached, *recomputed);
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  const auto wl = livelyTinyOn(lists);
  auto reference = generateGreedy(lists, wl, std::span<const int>(kPrompt), 20, none);
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  EXPECT_EQ(*cached, *reference);
}

// Every logit of every position of `ids`, a and b (row-major (T, V)), the same bits.
inline void expectSameLogits(const std::vector<Scalar>& a, const std::vector<Scalar>& b, std::size_t T, Index V) {
  ASSERT_EQ(a.size(), T * static_cast<std::size_t>(V));
  ASSERT_TRUE(osprey::testing::sameBits(a, b))
      << "first differing logit (row-major (T, V)): " << osprey::testing::firstBitDifference(a, b);
}

// Every logit of every position of `ids` under `weights`, on two handlers, bit for bit. Each
// handler's copy of the weights lives only while its logits are computed (the large models' copies
// are hundreds of MB).
template <class H1, class H2>
void logitsAgreeBitForBit(H1& h1, H2& h2, const HostWeights& weights, std::span<const int> ids) {
  const auto a = fullLogits(h1, forwardOn(h1, weights), ids);
  const auto b = fullLogits(h2, forwardOn(h2, weights), ids);
  expectSameLogits(a, b, ids.size(), weights.config.V);
}

// The same from weights already on each handler (w1, w2: the same host weights uploaded), which
// their forward layouts share (prepareForward adds only the blocks' transposed matrices).
template <class H1, class H2>
void logitsAgreeBitForBit(H1& h1, const Weights<Buf<H1>>& w1, H2& h2, const Weights<Buf<H2>>& w2,
                          std::span<const int> ids) {
  const auto on = [&](auto& h, const auto& w) {
    auto f = prepareForward(h, std::remove_cvref_t<decltype(w)>(w));
    if (!f.ok()) throw std::runtime_error(f.error().message);
    return fullLogits(h, *f, ids);
  };
  expectSameLogits(on(h1, w1), on(h2, w2), ids.size(), w1.config.V);
}

// Two handlers give the same logits for every position (bit for bit) and the same tokens.
template <class H1, class H2>
void handlersAgreeBitForBit(H1& h1, H2& h2) {
  const auto w1 = tinyOn(h1);
  const auto w2 = tinyOn(h2);
  const auto a = fullLogits(h1, w1, kPrompt);
  const auto b = fullLogits(h2, w2, kPrompt);
  ASSERT_TRUE(osprey::testing::sameBits(a, b))
      << "first differing logit (row-major (T, V)): " << osprey::testing::firstBitDifference(a, b);
  auto none = [](int) -> osprey::Result<void> { return {}; };
  auto t1 = generateGreedy(h1, w1, std::span<const int>(kPrompt), 20, none);
  auto t2 = generateGreedy(h2, w2, std::span<const int>(kPrompt), 20, none);
  ASSERT_TRUE(t1.ok()) << t1.error().message;
  ASSERT_TRUE(t2.ok()) << t2.error().message;
  EXPECT_EQ(*t1, *t2);
}

}  // namespace gpt2::testing
