// Softmax cross-entropy over the vocabulary, its mean, and the fused backward.
//
//   m[n]      = max_v logits[n][v]                      (v ascending)
//   e[n][v]   = exp(logits[n][v] - m[n])
//   s[n]      = sum_v e[n][v]                           (v ascending, from 0.0)
//   probs     = e / s
//   losses[n] = log(s[n]) - (logits[n][target[n]] - m[n])   (= -log softmax, without rounding probs)
//   loss      = (sum_n losses[n]) / N                   (n ascending, from 0.0)
//
// Backward of mean-reduced loss with respect to the logits:
//   dlogits[n][v] = (probs[n][v] - [v == target[n]]) * dloss,   dloss = 1/N for the mean.
#pragma once

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/fold_rows.hpp"

namespace gpt2 {

template <class H>
struct CrossEntropyOut {
  Buf<H> losses;  // (N) per-row loss
  Buf<H> probs;   // (N, V) softmax of the logits
};

namespace reference {

// losses (N), probs (N, V) from logits (N, V) and targets (N) [ids as doubles].
template <osprey::Tensor H>
osprey::Result<CrossEntropyOut<H>> crossEntropyForward(H& h, const Buf<H>& logits,
                                                       const Buf<H>& targets, osprey::Index N,
                                                       osprey::Index V) {
  const char* L = "cross-entropy";
  const osprey::Index NV = OSPREY_TRY(checkedProduct(L, {N, V}));
  OSPREY_CHECK(checkLength(h, logits, NV, L, "logits"));
  OSPREY_CHECK(checkLength(h, targets, N, L, "targets"));
  if (V <= 0) return osprey::Error{fmt::format("{}: vocabulary must be non-empty, got {}", L, V)};
  const auto xv = logits.view(), tv = targets.view();
  const osprey::Int Vi = V;

  // The running maximum of each row, from its first logit.
  auto rowMaxes = OSPREY_TRY(foldRowsFromFirst(h, N, V,
      [=] OSPREY_FN(KernelIndex<H> n, KernelIndex<H> v) -> KernelScalar<H> { return xv[osprey::asInt(n) * Vi + v]; },
      Larger{}, AsIs{}));
  const auto mv = rowMaxes.view();
  // e (N, V) = exp(logits - row max): the exponentials, computed once.
  auto e = OSPREY_TRY(h.build(NV, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return osprey::math::exp(xv[i] - mv[osprey::asInt(i) / Vi]);
  }));
  const auto ev = e.view();
  auto rowSums = OSPREY_TRY(sumRows(h, N, V,
      [=] OSPREY_FN(KernelIndex<H> n, KernelIndex<H> v) -> KernelScalar<H> { return ev[osprey::asInt(n) * Vi + v]; },
      AsIs{}));
  const auto sv = rowSums.view();
  auto probs = OSPREY_TRY(h.build(NV, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return ev[i] / sv[osprey::asInt(i) / Vi];
  }));
  auto losses = OSPREY_TRY(h.build(N, [=] OSPREY_FN(KernelIndex<H> n) -> KernelScalar<H> {
    const auto target = tokenIndex(tv[n], V);
    return osprey::math::log(sv[n]) - (xv[osprey::asInt(n) * Vi + target] - mv[n]);
  }));
  return CrossEntropyOut<H>{std::move(losses), std::move(probs)};
}

// dlogits (N, V) = (probs - onehot(targets)) * dloss; dloss is d(total)/d(losses[n]) (1/N for
// the mean loss).
template <osprey::Tensor H>
osprey::Result<Buf<H>> crossEntropyBackward(H& h, const Buf<H>& probs, const Buf<H>& targets,
                                            osprey::Index N, osprey::Index V, osprey::Scalar dloss) {
  const char* L = "cross-entropy backward";
  const osprey::Index NV = OSPREY_TRY(checkedProduct(L, {N, V}));
  OSPREY_CHECK(checkLength(h, probs, NV, L, "probs"));
  OSPREY_CHECK(checkLength(h, targets, N, L, "targets"));
  const auto pv = probs.view(), tv = targets.view();
  const osprey::Int Vi = V;
  return h.build(NV, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto nV = divMod(osprey::asInt(i), Vi);
    const auto n = nV.q, v = nV.r;
    const auto indicator = osprey::select(v == tokenIndex(tv[n], V), KernelScalar<H>(1.0), KernelScalar<H>(0.0));
    return (pv[i] - indicator) * dloss;
  });
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<CrossEntropyOut<H>> crossEntropyForward(H& h, const Buf<H>& logits,
                                                       const Buf<H>& targets, osprey::Index N,
                                                       osprey::Index V) {
  OSPREY_GPT2_DERIVED(crossEntropyForward, logits, targets, N, V)
  return reference::crossEntropyForward(h, logits, targets, N, V);
}

template <osprey::Tensor H>
osprey::Result<Buf<H>> crossEntropyBackward(H& h, const Buf<H>& probs, const Buf<H>& targets,
                                            osprey::Index N, osprey::Index V, osprey::Scalar dloss) {
  OSPREY_GPT2_DERIVED(crossEntropyBackward, probs, targets, N, V, dloss)
  return reference::crossEntropyBackward(h, probs, targets, N, V, dloss);
}

// The mean of losses (N): summed in row order from 0.0, then divided by N.
template <osprey::Tensor H>
osprey::Result<osprey::Scalar> meanLoss(H& h, const Buf<H>& losses) {
  const osprey::Index n = h.length(losses);
  if (n <= 0) return osprey::Error{"cross-entropy: mean of zero losses"};
  const osprey::Scalar total = OSPREY_TRY(sum(h, losses));
  return total / static_cast<osprey::Scalar>(n);
}

}  // namespace gpt2
