// The linear family: y = x · W + b with W held transposed, wT (OC, IC), and the layers built on
// it (the residual sum, the GELU and the LayerNorm that a linear layer's output kernel or input
// takes on), the tied lm head, and one row taken out of a batch. Derived operations written
// once against the effect: a handler may answer any of them whole with a member of the same name
// and arguments (the fast handler's one-row decoding path does).
//
// Every product is the effect's matMul (an fma chain in k order per output, docs/EXACTNESS.md);
// taking it transposed, Wᵀ · xᵀ, reads contiguous rows of W even for one row of x, and performs
// the same sum for each output as x · W.
#pragma once

#include <utility>

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/gelu.hpp"
#include "gpt2/layers/layernorm.hpp"
#include "gpt2/layers/matmul.hpp"
#include "gpt2/layers/residual.hpp"

namespace gpt2 {

// outT (OC, N) = wT (OC, IC) · xᵀ: the product matmulForwardTransposed computes before its final
// transpose. One row (decoding) is its own transpose — x (1, IC) and xᵀ (IC, 1) are the same
// doubles in the same order — so it goes to matMul as it is, without a copy.
template <osprey::Tensor H>
osprey::Result<Buf<H>> productTransposed(H& h, const Buf<H>& x, const Buf<H>& wT, osprey::Index N,
                                         osprey::Index IC, osprey::Index OC) {
  const char* L = "linear";
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct(L, {N, IC})), L, "x"));
  OSPREY_CHECK(checkLength(h, wT, OSPREY_TRY(checkedProduct(L, {OC, IC})), L, "weight"));
  if (N == 1) return h.matMul(wT, x, OC, IC, 1);                                     // (OC, 1)
  auto xT = OSPREY_TRY(transpose(h, x, N, IC));                                      // (IC, N)
  return h.matMul(wT, xT, OC, IC, N);                                                // (OC, N)
}

// out (N, OC) = prod (N, OC) + bias (OC) on every row.
template <osprey::Tensor H>
osprey::Result<Buf<H>> addBias(H& h, const Buf<H>& prod, const Buf<H>& bias, osprey::Index OC) {
  const auto pv = prod.view(), bv = bias.view();
  const osprey::Int O = OC;
  return h.build(h.length(prod), [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return pv[i] + bv[osprey::asInt(i) % O];
  });
}

// The element a linear layer's output kernel finally writes: the biased product itself.
struct Biased {
  template <class I, class S>
  OSPREY_FN S operator()(I, S y) const {
    return y;
  }
};

// out (N, OC) = then(i, prodT (OC, N) transposed + bias (OC) on every row), element i: the
// transpose only copies, so this is addBias(transpose(prodT)) in one kernel, and `then` lets the
// layer that reads the result (a residual sum, a GELU) be the same kernel too.
template <osprey::Tensor H, class Then = Biased>
osprey::Result<Buf<H>> transposeAddBias(H& h, const Buf<H>& prodT, const Buf<H>& bias, osprey::Index N,
                                        osprey::Index OC, Then then = {}) {
  const auto pv = prodT.view(), bv = bias.view();
  const osprey::Int O = OC, Ni = N;
  return h.build(h.length(prodT), [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto [n, o] = divMod(osprey::asInt(i), O);  // output (n, o) reads prodT[o][n]
    return then(i, pv[o * Ni + n] + bv[o]);
  });
}

// linear, linearResidual and linearGelu are derived operations too: a handler may answer each
// whole (its bias and element-wise work in the product's own kernel; the fast handler's one-row
// decoding path) with a member of the same name and arguments.
//
// Whether the handler answers matmulForwardTransposed itself (a fused path): then linear() asks
// it for the product, and the output kernel cannot take on the next layer's work.
template <class H>
concept AnswersLinear = requires(H& h, const Buf<H>& b, osprey::Index n) { h.matmulForwardTransposed(b, b, n, n, n); };

// Element i = then(i, (x · W + bias)[i]), with W held as wT (OC, IC): the product taken transposed
// (OC, N), then the transpose back, the bias add and `then` in one kernel.
template <osprey::Tensor H, class Then = Biased>
osprey::Result<Buf<H>> linearThen(H& h, const Buf<H>& x, const Buf<H>& wT, const Buf<H>& bias, osprey::Index N,
                                  osprey::Index IC, osprey::Index OC, Then then = {}) {
  OSPREY_CHECK(checkLength(h, bias, OC, "linear", "bias"));
  return transposeAddBias(h, OSPREY_TRY(productTransposed(h, x, wT, N, IC, OC)), bias, N, OC, then);
}

// out (N, OC) = x (N, IC) · W + bias (OC), with W held as wT (OC, IC). The product first, then
// the bias: the same operations as matmulForward on W itself. A handler that answers
// matmulForwardTransposed itself (a fused path) is asked for the product; otherwise linearThen.
template <osprey::Tensor H>
osprey::Result<Buf<H>> linear(H& h, const Buf<H>& x, const Buf<H>& wT, const Buf<H>& bias,
                              osprey::Index N, osprey::Index IC, osprey::Index OC) {
  OSPREY_GPT2_DERIVED(linear, x, wT, bias, N, IC, OC)
  if constexpr (AnswersLinear<H>) {
    OSPREY_CHECK(checkLength(h, bias, OC, "linear", "bias"));
    return addBias(h, OSPREY_TRY(matmulForwardTransposed(h, x, wT, N, IC, OC)), bias, OC);
  } else {
    return linearThen(h, x, wT, bias, N, IC, OC);
  }
}

// The residual connection's element after a linear layer: x[i] + y, y the biased product.
template <class V>
struct ResidualOf {
  V x;
  template <class I, class S>
  OSPREY_FN S operator()(I i, S y) const {
    return x[i] + y;
  }
};
template <class V>
ResidualOf(V) -> ResidualOf<V>;

// x + linear(in): the residual connection after a linear layer. Unless the handler answers the
// product or the residual itself, the bias, the transpose and the residual sum are one kernel:
// x[i] + (prod + bias), the same two additions as residualForward(x, linear(...)). reference::
// is the definition (its calls are the dispatching gpt2:: layers, not reference::'s namesakes); a
// handler answering one shape itself (one decoded row) falls back to it for the others.
namespace reference {
template <osprey::Tensor H>
osprey::Result<Buf<H>> linearResidual(H& h, const Buf<H>& x, const Buf<H>& in, const Buf<H>& wT,
                                      const Buf<H>& bias, osprey::Index N, osprey::Index IC, osprey::Index OC) {
  if constexpr (AnswersLinear<H> || requires { h.residualForward(x, x); }) {
    return gpt2::residualForward(h, x, OSPREY_TRY(gpt2::linear(h, in, wT, bias, N, IC, OC)));
  } else {
    OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct("residual", {N, OC})), "residual", "a"));
    return gpt2::linearThen(h, in, wT, bias, N, IC, OC, ResidualOf{x.view()});
  }
}
}  // namespace reference
template <osprey::Tensor H>
osprey::Result<Buf<H>> linearResidual(H& h, const Buf<H>& x, const Buf<H>& in, const Buf<H>& wT,
                                      const Buf<H>& bias, osprey::Index N, osprey::Index IC, osprey::Index OC) {
  OSPREY_GPT2_DERIVED(linearResidual, x, in, wT, bias, N, IC, OC)
  return reference::linearResidual(h, x, in, wT, bias, N, IC, OC);
}

// gelu(linear(in)), with the GELU in the linear layer's output kernel unless the handler answers
// the product or the GELU itself: geluValue(prod + bias), as geluForward computes it.
template <osprey::Tensor H>
osprey::Result<Buf<H>> linearGelu(H& h, const Buf<H>& in, const Buf<H>& wT, const Buf<H>& bias, osprey::Index N,
                                  osprey::Index IC, osprey::Index OC) {
  OSPREY_GPT2_DERIVED(linearGelu, in, wT, bias, N, IC, OC)
  if constexpr (AnswersLinear<H> || requires { h.geluForward(in); }) {
    return geluForward(h, OSPREY_TRY(linear(h, in, wT, bias, N, IC, OC)));
  } else {
    return linearThen(h, in, wT, bias, N, IC, OC,
                      [] OSPREY_FN(KernelIndex<H>, KernelScalar<H> y) -> KernelScalar<H> { return geluValue(y); });
  }
}

// linear(layernorm(x)): the LayerNorm in front of a block's attention, whose statistics inference
// does not keep. x (N, IC) -> (N, OC). normLinearGelu is the same in front of the MLP. Derived
// operations: a handler may answer each whole (the fast handler's one-row decoding normalises the
// row inside the product's own kernel).
namespace reference {
template <osprey::Tensor H>
osprey::Result<Buf<H>> normLinear(H& h, const Buf<H>& x, const Buf<H>& lnWeight, const Buf<H>& lnBias,
                                  const Buf<H>& wT, const Buf<H>& bias, osprey::Index N, osprey::Index IC,
                                  osprey::Index OC) {
  auto ln = OSPREY_TRY(gpt2::layernormForward(h, x, lnWeight, lnBias, N, IC));                // (N, IC)
  return gpt2::linear(h, ln.out, wT, bias, N, IC, OC);
}
template <osprey::Tensor H>
osprey::Result<Buf<H>> normLinearGelu(H& h, const Buf<H>& x, const Buf<H>& lnWeight, const Buf<H>& lnBias,
                                      const Buf<H>& wT, const Buf<H>& bias, osprey::Index N, osprey::Index IC,
                                      osprey::Index OC) {
  auto ln = OSPREY_TRY(gpt2::layernormForward(h, x, lnWeight, lnBias, N, IC));                // (N, IC)
  return gpt2::linearGelu(h, ln.out, wT, bias, N, IC, OC);
}
}  // namespace reference

template <osprey::Tensor H>
osprey::Result<Buf<H>> normLinear(H& h, const Buf<H>& x, const Buf<H>& lnWeight, const Buf<H>& lnBias,
                                  const Buf<H>& wT, const Buf<H>& bias, osprey::Index N, osprey::Index IC,
                                  osprey::Index OC) {
  OSPREY_GPT2_DERIVED(normLinear, x, lnWeight, lnBias, wT, bias, N, IC, OC)
  return reference::normLinear(h, x, lnWeight, lnBias, wT, bias, N, IC, OC);
}
template <osprey::Tensor H>
osprey::Result<Buf<H>> normLinearGelu(H& h, const Buf<H>& x, const Buf<H>& lnWeight, const Buf<H>& lnBias,
                                      const Buf<H>& wT, const Buf<H>& bias, osprey::Index N, osprey::Index IC,
                                      osprey::Index OC) {
  OSPREY_GPT2_DERIVED(normLinearGelu, x, lnWeight, lnBias, wT, bias, N, IC, OC)
  return reference::normLinearGelu(h, x, lnWeight, lnBias, wT, bias, N, IC, OC);
}

// out (C) = row `row` of x (rows, C).
template <osprey::Tensor H>
osprey::Result<Buf<H>> takeRow(H& h, const Buf<H>& x, osprey::Index rows, osprey::Index C,
                               osprey::Index row) {
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct("takeRow", {rows, C})), "takeRow", "x"));
  if (row < 0 || row >= rows)
    return osprey::Error{fmt::format("takeRow: row {} outside {} rows", row, rows)};
  const auto xv = x.view();
  const osprey::Int first = osprey::asInt(row) * osprey::asInt(C);
  return h.build(C, [=] OSPREY_FN(KernelIndex<H> c) -> KernelScalar<H> { return xv[first + c]; });
}
// logits (N, V) = hidden (N, C) · wteᵀ: GPT-2's output projection is the token embedding. For
// one row the product (V, 1) already is the logits (1, V) in memory: no transpose back.
template <osprey::Tensor H>
osprey::Result<Buf<H>> lmHeadOf(H& h, const Buf<H>& hidden, const Buf<H>& wte, osprey::Index N, osprey::Index C,
                                osprey::Index V) {
  if constexpr (!AnswersLinear<H>) {
    if (N == 1) return productTransposed(h, hidden, wte, 1, C, V);                   // (V)
  }
  return matmulForwardTransposed(h, hidden, wte, N, C, V);
}

}  // namespace gpt2
