// Softmax cross-entropy cases, generic over the handler.
#pragma once

#include "layers/layer_support.hpp"

namespace gpt2::testing::cross_entropy_cases {

template <class H>
void forwardMatchesLoop(H& h) {
  const Index N = 4, V = 9;
  const auto logits = randomValues(N * V, 201, -5.0, 5.0);
  const std::vector<Scalar> targets = {0, 8, 3, 3};
  auto got = must(crossEntropyForward(h, lift(h, logits), lift(h, targets), N, V));
  std::vector<Scalar> probs(N * V), losses(N);
  for (Index n = 0; n < N; ++n) {
    Scalar m = logits[n * V];
    for (Index v = 1; v < V; ++v) m = std::max(m, logits[n * V + v]);
    Scalar z = 0;
    for (Index v = 0; v < V; ++v) z += std::exp(logits[n * V + v] - m);
    for (Index v = 0; v < V; ++v) probs[n * V + v] = std::exp(logits[n * V + v] - m) / z;
    losses[n] = -std::log(probs[n * V + static_cast<Index>(targets[n])]);
  }
  expectClose(readAll(h, got.probs), probs, kForwardRtol, kForwardAtol, "probs");
  expectClose(readAll(h, got.losses), losses, kForwardRtol, kForwardAtol, "losses");
  Scalar mean = 0;
  for (Scalar l : losses) mean += l;
  mean /= N;
  EXPECT_NEAR(must(meanLoss(h, got.losses)), mean, 1e-13);
}

// Equal logits: every row's loss is log(V).
template <class H>
void uniformLogitsGiveLogV(H& h) {
  const Index N = 3, V = 50257;
  auto got = must(crossEntropyForward(h, lift(h, std::vector<Scalar>(N * V, 0.25)),
                                      lift(h, std::vector<Scalar>{0, 17, 50256}), N, V));
  for (Scalar l : readAll(h, got.losses)) EXPECT_NEAR(l, std::log(static_cast<Scalar>(V)), 1e-13);
}

template <class H>
void backwardMatchesFiniteDifferences(H& h) {
  const Index N = 3, V = 5;
  const auto logits = randomValues(N * V, 211, -3.0, 3.0);
  const std::vector<Scalar> targets = {4, 0, 2};
  auto tgt = lift(h, targets);
  auto fwd = must(crossEntropyForward(h, lift(h, logits), tgt, N, V));
  auto dlogits = must(crossEntropyBackward(h, fwd.probs, tgt, N, V, 1.0 / N));
  auto loss = [&](const std::vector<Scalar>& x) {
    return must(meanLoss(h, must(crossEntropyForward(h, lift(h, x), tgt, N, V)).losses));
  };
  expectClose(readAll(h, dlogits), numericGradient(logits, loss), kGradRtol, kGradAtol, "dlogits");
}

template <class H>
void rejectsBadTargets(H& h) {
  auto logits = lift(h, randomValues(2 * 3, 221));
  expectError(crossEntropyForward(h, logits, lift(h, {0, 3}), 2, 3), "index out of range: 3 not below length 3");
  expectError(crossEntropyForward(h, logits, lift(h, {0, 1, 2}), 2, 3), "targets has 3 elements, expected 2");
  expectError(crossEntropyBackward(h, logits, lift(h, {-1, 0}), 2, 3, 0.5), "index out of range");
}

}  // namespace gpt2::testing::cross_entropy_cases
