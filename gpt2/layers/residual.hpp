// The residual connection out = a + b, and its backward: the gradient passes through unchanged
// to both inputs (dout is the gradient of a and of b; buffers are immutable, so it is shared).
//
// Each residual sum in a block meets a layer on either side of it: in the forward, the branch's
// last linear layer (x + (in · w + bias)); in the backward, the LayerNorm backward whose dx joins
// the residual stream's gradient (dresid + dx). Those pairs are derived operations of their own,
// defined as the two layers one after the other, so that a handler may answer the pair with one
// pass (the sum in the product's epilogue; the sum inside the LayerNorm backward's kernel).
#pragma once

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/layernorm.hpp"
#include "gpt2/layers/matmul.hpp"

namespace gpt2 {

template <class H>
struct ResidualGrads {
  Buf<H> da;  // same shape as a
  Buf<H> db;  // same shape as b
};

namespace reference {

// out = a + b, element-wise (same shape).
template <osprey::Tensor H>
osprey::Result<Buf<H>> residualForward(H& h, const Buf<H>& a, const Buf<H>& b) {
  OSPREY_CHECK(checkLength(h, b, h.length(a), "residual", "b"));
  return add(h, a, b);
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<Buf<H>> residualForward(H& h, const Buf<H>& a, const Buf<H>& b) {
  OSPREY_GPT2_DERIVED(residualForward, a, b)
  return reference::residualForward(h, a, b);
}

// da = db = dout.
template <osprey::Tensor H>
osprey::Result<ResidualGrads<H>> residualBackward(H&, const Buf<H>& dout) {
  return ResidualGrads<H>{dout, dout};
}

namespace reference {

// x (N, OC) + (in (N, IC) · w (IC, OC) + bias (OC)): a branch's last linear layer onto the
// residual stream, the residual sum of x and matmulForward(in, w, bias).
template <osprey::Tensor H>
osprey::Result<Buf<H>> residualMatmulForward(H& h, const Buf<H>& x, const Buf<H>& in, const Buf<H>& w,
                                             const Buf<H>& bias, osprey::Index N, osprey::Index IC,
                                             osprey::Index OC) {
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct("residual matmul", {N, OC})), "residual matmul", "x"));
  return reference::residualForward(h, x, OSPREY_TRY(reference::matmulForward(h, in, w, bias, N, IC, OC)));
}

// layernormBackward(dout, x, w, mean, rstd) with dresid (N, C) added onto its dx (dresid + dx, in
// that order): the LayerNorm's input gradient joining the residual stream's.
template <osprey::Tensor H>
osprey::Result<LayerNormGrads<H>> residualLayernormBackward(H& h, const Buf<H>& dresid, const Buf<H>& dout,
                                                            const Buf<H>& x, const Buf<H>& w, const Buf<H>& mean,
                                                            const Buf<H>& rstd, osprey::Index N, osprey::Index C) {
  // The public entry: a handler that answers layernormBackward (gpt2/cuda/exact_cuda.hpp) answers
  // it here too.
  auto g = OSPREY_TRY(gpt2::layernormBackward(h, dout, x, w, mean, rstd, N, C));
  OSPREY_CHECK(checkLength(h, dresid, h.length(g.dx), "residual layernorm backward", "dresid"));
  g.dx = OSPREY_TRY(add(h, dresid, g.dx));
  return g;
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<Buf<H>> residualMatmulForward(H& h, const Buf<H>& x, const Buf<H>& in, const Buf<H>& w,
                                             const Buf<H>& bias, osprey::Index N, osprey::Index IC,
                                             osprey::Index OC) {
  OSPREY_GPT2_DERIVED(residualMatmulForward, x, in, w, bias, N, IC, OC)
  return reference::residualMatmulForward(h, x, in, w, bias, N, IC, OC);
}

template <osprey::Tensor H>
osprey::Result<LayerNormGrads<H>> residualLayernormBackward(H& h, const Buf<H>& dresid, const Buf<H>& dout,
                                                            const Buf<H>& x, const Buf<H>& w, const Buf<H>& mean,
                                                            const Buf<H>& rstd, osprey::Index N, osprey::Index C) {
  OSPREY_GPT2_DERIVED(residualLayernormBackward, dresid, dout, x, w, mean, rstd, N, C)
  return reference::residualLayernormBackward(h, dresid, dout, x, w, mean, rstd, N, C);
}

}  // namespace gpt2
