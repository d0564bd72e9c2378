// A linear layer together with the one layer that reads its output: the block's attention after
// qkv = x · w + bias, and GELU after fc = x · w + bias. Each output is its layer's only input
// (the backward reads it again, as that layer's input and as the product's dout partner), so each
// pair is a derived operation of its own, defined as the two layers one after the other: a handler
// may choose how the product's output is stored between them (the fast handler with bf16 products
// keeps qkv and fc as bf16, the form its attention and GELU read). Likewise in the backward, the fc
// projection's dx, which only GELU's backward reads.
#pragma once

#include "gpt2/layers/attention.hpp"
#include "gpt2/layers/common.hpp"
#include "gpt2/layers/gelu.hpp"
#include "gpt2/layers/matmul.hpp"

namespace gpt2 {

template <class H>
struct ProjectedAttentionOut {
  Buf<H> qkv;             // (N, 3C), N = B·T
  AttentionOut<H> attn;   // out (N, C) and what the backward reads
};

template <class H>
struct ProjectedGeluOut {
  Buf<H> fc;    // (N, OC), GELU's input
  Buf<H> gelu;  // (N, OC)
};

// The backward of out = gelu(f) · w + bias (the fc projection after GELU): the projection's dx is
// GELU's dout and read by nothing else, so this pair too may keep it as a handler chooses.
template <class H>
struct GeluMatmulGrads {
  Buf<H> df;     // (N, IC), the gradient of GELU's input f
  Buf<H> dw;     // (IC, OC)
  Buf<H> dbias;  // (OC)
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

// fc (N, OC) = x (N, IC) · w (IC, OC) + bias (OC), then geluForward(fc).
template <osprey::Tensor H>
osprey::Result<ProjectedGeluOut<H>> matmulGeluForward(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& bias,
                                                      osprey::Index N, osprey::Index IC, osprey::Index OC) {
  ProjectedGeluOut<H> o;
  o.fc = OSPREY_TRY(reference::matmulForward(h, x, w, bias, N, IC, OC));
  o.gelu = OSPREY_TRY(reference::geluForward(h, o.fc));
  return o;
}

// matmulBackward(dout (N, OC), g (N, IC), w (IC, OC)), then geluBackward(its dx, f (N, IC)), g
// being gelu(f).
template <osprey::Tensor H>
osprey::Result<GeluMatmulGrads<H>> geluMatmulBackward(H& h, const Buf<H>& dout, const Buf<H>& g, const Buf<H>& w,
                                                      const Buf<H>& f, osprey::Index N, osprey::Index IC,
                                                      osprey::Index OC) {
  auto m = OSPREY_TRY(reference::matmulBackward(h, dout, g, w, N, IC, OC));
  auto df = OSPREY_TRY(reference::geluBackward(h, m.dx, f));
  return GeluMatmulGrads<H>{std::move(df), std::move(m.dw), std::move(m.dbias)};
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<GeluMatmulGrads<H>> geluMatmulBackward(H& h, const Buf<H>& dout, const Buf<H>& g, const Buf<H>& w,
                                                      const Buf<H>& f, osprey::Index N, osprey::Index IC,
                                                      osprey::Index OC) {
  OSPREY_GPT2_DERIVED(geluMatmulBackward, dout, g, w, f, N, IC, OC)
  return reference::geluMatmulBackward(h, dout, g, w, f, N, IC, OC);
}

template <osprey::Tensor H>
osprey::Result<ProjectedGeluOut<H>> matmulGeluForward(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& bias,
                                                      osprey::Index N, osprey::Index IC, osprey::Index OC) {
  OSPREY_GPT2_DERIVED(matmulGeluForward, x, w, bias, N, IC, OC)
  return reference::matmulGeluForward(h, x, w, bias, N, IC, OC);
}

template <osprey::Tensor H>
osprey::Result<ProjectedAttentionOut<H>> matmulAttentionForward(H& h, const Buf<H>& x, const Buf<H>& w,
                                                                const Buf<H>& bias, osprey::Index B, osprey::Index T,
                                                                osprey::Index C, osprey::Index NH) {
  OSPREY_GPT2_DERIVED(matmulAttentionForward, x, w, bias, B, T, C, NH)
  return reference::matmulAttentionForward(h, x, w, bias, B, T, C, NH);
}

}  // namespace gpt2
