// Greedy generation, written once against the effect: prefill the prompt, then one cached
// position per new token; the next token is indexOf(logits, max), the max being exactly what a
// reduce in element order gives (see `largest`). Each token is handed to `onToken` as soon as it is known (streaming).
//
// generateGreedyRecompute is the same generation without a cache (the full pass over the whole
// sequence for every token): slower, and kept to prove the cache changes nothing.
#pragma once

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "gpt2/model/model.hpp"

namespace gpt2 {

// The larger of a running maximum and the next element; the earlier one wins ties, and NaN
// never becomes the maximum (a comparison with NaN is false).
template <class S>
OSPREY_INLINE S maxCombine(S best, S x) {
  return osprey::select(x > best, x, best);
}

// The largest of `x` (n), equal bit for bit to the left fold
// reduce(x, -inf, maxCombine) in element order, found in two steps: the fold of each run of
// kMaxRun consecutive elements (one kernel, the runs in parallel), then the fold of the run
// results in run order. Why the answer is the same double: the element-order fold returns the
// first element that compares greater than everything before it and not less than anything after
// it — the first occurrence of the maximum (NaN never wins, and of two equal values, -0.0 and
// +0.0 included, the earlier stays). Each run's fold returns its own first maximum, none of them
// NaN, and the fold over the runs keeps the earliest run whose maximum is the overall maximum:
// again the first occurrence overall. Comparisons are exact, so no rounding enters. (A device
// runs a left fold on one thread; over 50257 logits per token that one thread would be a
// noticeable share of a decoding step.)
inline constexpr osprey::Index kMaxRun = 64;

template <osprey::Tensor H>
osprey::Result<osprey::Scalar> largest(H& h, const Buf<H>& x) {
  const osprey::Scalar lowest = -std::numeric_limits<osprey::Scalar>::infinity();
  const osprey::Index n = h.length(x);
  const auto xv = x.view();
  const osprey::Int N = n, R = kMaxRun;
  auto runs = OSPREY_TRY(h.build((n + kMaxRun - 1) / kMaxRun,                           // (ceil(n / kMaxRun))
                                 [=] OSPREY_FN(KernelIndex<H> r) -> KernelScalar<H> {
    using S = KernelScalar<H>;
    const auto first = osprey::asInt(r) * R;
    const auto end = osprey::select(N - first < R, decltype(first)(N), first + R);
    return osprey::foldRange(S(lowest), first, end, [&](auto i, S best) { return maxCombine<S>(best, xv[i]); });
  }));
  return h.reduce(runs, lowest,
      [=] OSPREY_FN(KernelScalar<H> a, KernelScalar<H> b) -> KernelScalar<H> { return maxCombine<KernelScalar<H>>(a, b); });
}

// The greedy choice: the smallest index holding the largest logit. logits (V).
template <osprey::Tensor H>
osprey::Result<osprey::Index> greedyToken(H& h, const Buf<H>& logits) {
  OSPREY_GPT2_DERIVED(greedyToken, logits)  // a device-side argmax (the fast handler)
  const osprey::Scalar best = OSPREY_TRY(largest(h, logits));
  // A largest logit of +inf (activations that overflowed) or -inf (every logit -inf or NaN) picks
  // no token: the first of several infinities, or token 0, would be text made of nothing.
  if (!std::isfinite(best))
    return osprey::Error{fmt::format("generate: the largest logit is {}: the model's activations are not finite (the "
                                     "weights are broken or too large)",
                                     best)};
  return h.indexOf(logits, best);  // found: a finite largest logit is one of the logits
}

// tokens (n) as a buffer of ids held in doubles.
template <osprey::Tensor H>
osprey::Result<Buf<H>> tokenBuffer(H& h, std::span<const int> ids) {
  std::vector<osprey::Scalar> values(ids.begin(), ids.end());
  return h.fromList(std::span<const osprey::Scalar>(values));
}

// Whether `promptLength` tokens and `count` more fit a context of maxT positions; the error
// says how far over they are.
inline osprey::Result<void> checkFitsContext(const Config& c, osprey::Index promptLength,
                                             osprey::Index count) {
  if (promptLength < 1)
    return osprey::Error{"the prompt is empty: GPT-2 needs at least one token to continue"};
  if (count < 0) return osprey::Error{fmt::format("cannot generate {} tokens", count)};
  if (promptLength > c.maxT || count > c.maxT - promptLength)
    return osprey::Error{fmt::format(
        "the prompt is {} tokens and {} more were asked for: {} positions do not fit the "
        "context of {} (shorten the prompt or ask for at most {} tokens)",
        promptLength, count, promptLength + count, c.maxT,
        promptLength >= c.maxT ? 0 : c.maxT - promptLength)};
  return {};
}

namespace detail {
// `count` tokens after the prompt's pass (`step`): the next token chosen from the logits by
// choose(i, logits) (i counts the new tokens from 0; it returns Result<int>), then one cached step
// for it, and so on. onToken(int id) is called for each new token in order; it returns
// Result<void> (a failed write stops generation).
template <osprey::Tensor H, class Choose, class OnToken>
osprey::Result<std::vector<int>> continueChoosing(H& h, const ForwardWeights<H>& w, StepOut<H>& step,
                                                  osprey::Index count, Choose&& choose, OnToken& onToken) {
  std::vector<int> out;
  for (osprey::Index i = 0; i < count; ++i) {
    if (i > 0) {
      const int one[1] = {out.back()};
      auto token = OSPREY_TRY(tokenBuffer(h, std::span<const int>(one)));             // (1)
      step = OSPREY_TRY(decodeStep(h, w, step.cache, token));
    }
    const int next = OSPREY_TRY(choose(i, step.logits));
    out.push_back(next);
    OSPREY_CHECK(onToken(next));
  }
  return out;
}

// The prompt's pass (after checking that prompt and continuation fit the context), then
// continueAfter(step) for the `count` new tokens.
template <osprey::Tensor H, class ContinueAfter>
osprey::Result<std::vector<int>> afterPrompt(H& h, const ForwardWeights<H>& w, std::span<const int> prompt,
                                             osprey::Index count, ContinueAfter&& continueAfter) {
  const auto T = static_cast<osprey::Index>(prompt.size());
  OSPREY_CHECK(checkFitsContext(w.config, T, count));
  if (count == 0) return std::vector<int>{};
  auto tokens = OSPREY_TRY(tokenBuffer(h, prompt));                                    // (T)
  auto step = OSPREY_TRY(prefill(h, w, tokens, T));
  return continueAfter(step);
}
}  // namespace detail

namespace reference {
// `count` greedy tokens after the prompt's pass (`step`), each the logits' first maximum.
template <osprey::Tensor H, class OnToken>
osprey::Result<std::vector<int>> continueGreedy(H& h, const ForwardWeights<H>& w, StepOut<H>& step,
                                                osprey::Index count, OnToken& onToken) {
  return detail::continueChoosing(h, w, step, count,
      [&](osprey::Index, const Buf<H>& logits) -> osprey::Result<int> {
        const osprey::Index token = OSPREY_TRY(greedyToken(h, logits));
        return static_cast<int>(token);
      },
      onToken);
}
}  // namespace reference

// A derived operation: a handler may answer the whole continuation (the fast handler records one
// decodeStep as a CUDA graph and replays it, the token and position staying on the device:
// fast/decode_graph.hpp).
template <osprey::Tensor H, class OnToken>
osprey::Result<std::vector<int>> continueGreedy(H& h, const ForwardWeights<H>& w, StepOut<H>& step,
                                                osprey::Index count, OnToken& onToken) {
  OSPREY_GPT2_DERIVED(continueGreedy, w, step, count, onToken)
  return reference::continueGreedy(h, w, step, count, onToken);
}

// Greedy continuation of `prompt` by `count` tokens, with a KV cache. onToken(int id) is called
// for each new token in order; it returns Result<void> (a failed write stops generation).
template <osprey::Tensor H, class OnToken>
osprey::Result<std::vector<int>> generateGreedy(H& h, const ForwardWeights<H>& w,
                                                std::span<const int> prompt, osprey::Index count,
                                                OnToken&& onToken) {
  return detail::afterPrompt(h, w, prompt, count,
                             [&](StepOut<H>& step) { return continueGreedy(h, w, step, count, onToken); });
}

// The same continuation recomputed from scratch for every token (no cache).
template <osprey::Tensor H>
osprey::Result<std::vector<int>> generateGreedyRecompute(H& h, const ForwardWeights<H>& w,
                                                         std::span<const int> prompt,
                                                         osprey::Index count) {
  OSPREY_CHECK(checkFitsContext(w.config, static_cast<osprey::Index>(prompt.size()), count));
  std::vector<int> sequence(prompt.begin(), prompt.end()), out;
  for (osprey::Index i = 0; i < count; ++i) {
    const auto T = static_cast<osprey::Index>(sequence.size());
    auto tokens = OSPREY_TRY(tokenBuffer(h, std::span<const int>(sequence)));          // (T)
    auto logits = OSPREY_TRY(forwardLogits(h, w, tokens, 1, T));                      // (T, V)
    auto last = OSPREY_TRY(takeRow(h, logits, T, w.config.V, T - 1));                  // (V)
    const auto next = static_cast<int>(OSPREY_TRY(greedyToken(h, last)));
    out.push_back(next);
    sequence.push_back(next);
  }
  return out;
}

}  // namespace gpt2
