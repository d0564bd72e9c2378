// The lm head and the loss as one derived pair: the training step's last layer.
//
//   headLoss          logits = z · wteᵀ (the tied embedding);  losses, probs = cross-entropy
//   headLossBackward  dlogits = cross-entropy backward;  dz, dwte = the lm head's backward
//
// The reference definitions are those calls, in that order: a handler that answers neither gets
// the bits it got from calling them one by one. A handler answering both may keep the
// probabilities in a layout of its own between them (the fast handler keeps rows padded to a
// multiple of 4, the layout its products want), so `probs` is for headLossBackward to read.
#pragma once

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/cross_entropy.hpp"
#include "gpt2/layers/matmul.hpp"

namespace gpt2 {

namespace reference {
// losses (N) and probs (N, V) from z (N, C), wte (V, C) and targets (N).
template <osprey::Tensor H>
osprey::Result<CrossEntropyOut<H>> headLoss(H& h, const Buf<H>& z, const Buf<H>& wte, const Buf<H>& targets,
                                            osprey::Index N, osprey::Index C, osprey::Index V) {
  auto logits = OSPREY_TRY(gpt2::matmulForwardTransposed(h, z, wte, N, C, V));  // (N, V)
  return gpt2::crossEntropyForward(h, logits, targets, N, V);
}

// dz (N, C) and the head's share of dwte (V, C), for the loss sum(losses) · dloss.
template <osprey::Tensor H>
osprey::Result<MatmulTransposedGrads<H>> headLossBackward(H& h, const Buf<H>& probs, const Buf<H>& targets,
                                                          const Buf<H>& z, const Buf<H>& wte, osprey::Index N,
                                                          osprey::Index C, osprey::Index V, osprey::Scalar dloss) {
  auto dlogits = OSPREY_TRY(gpt2::crossEntropyBackward(h, probs, targets, N, V, dloss));  // (N, V)
  return gpt2::matmulBackwardTransposed(h, dlogits, z, wte, N, C, V);
}
}  // namespace reference

template <osprey::Tensor H>
osprey::Result<CrossEntropyOut<H>> headLoss(H& h, const Buf<H>& z, const Buf<H>& wte, const Buf<H>& targets,
                                            osprey::Index N, osprey::Index C, osprey::Index V) {
  OSPREY_GPT2_DERIVED(headLoss, z, wte, targets, N, C, V)
  return reference::headLoss(h, z, wte, targets, N, C, V);
}

template <osprey::Tensor H>
osprey::Result<MatmulTransposedGrads<H>> headLossBackward(H& h, const Buf<H>& probs, const Buf<H>& targets,
                                                          const Buf<H>& z, const Buf<H>& wte, osprey::Index N,
                                                          osprey::Index C, osprey::Index V, osprey::Scalar dloss) {
  OSPREY_GPT2_DERIVED(headLossBackward, probs, targets, z, wte, N, C, V, dloss)
  return reference::headLossBackward(h, probs, targets, z, wte, N, C, V, dloss);
}

}  // namespace gpt2
