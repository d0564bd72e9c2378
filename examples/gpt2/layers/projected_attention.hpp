// A block's attention with the linear layer in front of it: qkv = x · w + bias, then causal
// attention over qkv. qkv is that layer's output and attention's only input (the backward reads it
// again, as attention and as the layer's dout's partner), so the pair is a derived operation of its
// own, defined as the two layers one after the other: a handler may choose how qkv is stored
// between them (the fast handler with bf16 products keeps it as bf16, which is all its attention
// reads).
#pragma once

#include "gpt2/layers/attention.hpp"
#include "gpt2/layers/common.hpp"
#include "gpt2/layers/matmul.hpp"

namespace gpt2 {

template <class H>
struct ProjectedAttentionOut {
  Buf<H> qkv;             // (N, 3C), N = B·T
  AttentionOut<H> attn;   // out (N, C) and what the backward reads
};

namespace reference {

// qkv (B·T, 3C) = x (B·T, C) · w (C, 3C) + bias (3C), then attentionForward(qkv, B, T, C, NH).
template <osprey::Tensor H>
osprey::Result<ProjectedAttentionOut<H>> matmulAttentionForward(H& h, const Buf<H>& x, const Buf<H>& w,
                                                                const Buf<H>& bias, osprey::Index B, osprey::Index T,
                                                                osprey::Index C, osprey::Index NH) {
  const osprey::Index N = OSPREY_TRY(checkedProduct("attention input", {B, T}));
  ProjectedAttentionOut<H> o;
  o.qkv = OSPREY_TRY(reference::matmulForward(h, x, w, bias, N, C, 3 * C));
  o.attn = OSPREY_TRY(reference::attentionForward(h, o.qkv, B, T, C, NH));
  return o;
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<ProjectedAttentionOut<H>> matmulAttentionForward(H& h, const Buf<H>& x, const Buf<H>& w,
                                                                const Buf<H>& bias, osprey::Index B, osprey::Index T,
                                                                osprey::Index C, osprey::Index NH) {
  OSPREY_GPT2_DERIVED(matmulAttentionForward, x, w, bias, B, T, C, NH)
  return reference::matmulAttentionForward(h, x, w, bias, B, T, C, NH);
}

}  // namespace gpt2
