// The linear layers: y = x . W + b with W in Conv1D layout (IC, OC), the tied output projection
// y = x . Wtᵀ with Wt stored (OC, IC) (GPT-2's lm head reads the token embedding (V, C)), and
// their backward passes.
//
// Every large product goes through the effect's matMul, whose contract is "each output
// accumulates in k order from 0.0". Where a product needs a transposed operand, the result is
// computed as the transpose of the product with the operands swapped, which performs exactly the
// same sum for each output element, so only the small activation tensors (N rows) are ever
// transposed, never the weights:
//
//   (x . Wtᵀ)[n][o] = sum_i x[n][i] * Wt[o][i]  =  (Wt . xᵀ)[o][n]
//   (dout . Wᵀ)[n][i] = sum_o dout[n][o] * W[i][o]  =  (W . doutᵀ)[i][n]
//
// (a product's terms are a*b or b*a, which IEEE multiplication gives identically).
#pragma once

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/fold_rows.hpp"
#include "gpt2/layers/ordered_sum.hpp"
#include "osprey/transposed.hpp"

namespace gpt2 {

template <class H>
struct MatmulGrads {
  Buf<H> dx;     // (N, IC)
  Buf<H> dw;     // (IC, OC)
  Buf<H> dbias;  // (OC)
};

template <class H>
struct MatmulTransposedGrads {
  Buf<H> dx;   // (N, IC)
  Buf<H> dwt;  // (OC, IC), the layout the weight is stored in
};

// Whether the handler multiplies with an operand held transposed, reading it where it lies
// (osprey/transposed.hpp; the cuda device, through cuBLASLt): then the products below take their
// operands as held instead of transposed copies. The bits are the same either way: each output's
// terms and their order are those of the product of the copies.
template <class H>
concept TakesTransposedOperands = requires(H& h, const Buf<H>& b, osprey::Index n) {
  h.matMulTransposed(b, b, n, n, n, osprey::Transposed::A);
};

namespace reference {

// out (N, OC) = x (N, IC) . w (IC, OC) + bias (OC); the product first, then the bias.
template <osprey::Tensor H>
osprey::Result<Buf<H>> matmulForward(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& bias,
                                     osprey::Index N, osprey::Index IC, osprey::Index OC) {
  const char* L = "matmul";
  const osprey::Index NO = OSPREY_TRY(checkedProduct(L, {N, OC}));
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct(L, {N, IC})), L, "x"));
  OSPREY_CHECK(checkLength(h, w, OSPREY_TRY(checkedProduct(L, {IC, OC})), L, "weight"));
  OSPREY_CHECK(checkLength(h, bias, OC, L, "bias"));
  auto prod = OSPREY_TRY(h.matMul(x, w, N, IC, OC));
  const auto pv = prod.view(), bv = bias.view();
  const osprey::Int O = OC;
  return h.build(NO, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return pv[i] + bv[osprey::asInt(i) % O];
  });
}

// out (N, OC) = x (N, IC) . wtᵀ, wt stored (OC, IC); no bias (the tied lm head).
template <osprey::Tensor H>
osprey::Result<Buf<H>> matmulForwardTransposed(H& h, const Buf<H>& x, const Buf<H>& wt,
                                               osprey::Index N, osprey::Index IC, osprey::Index OC) {
  const char* L = "matmul (transposed weight)";
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct(L, {N, IC})), L, "x"));
  OSPREY_CHECK(checkLength(h, wt, OSPREY_TRY(checkedProduct(L, {OC, IC})), L, "weight"));
  if constexpr (TakesTransposedOperands<H>)
    return h.matMulTransposed(x, wt, N, IC, OC, osprey::Transposed::B);  // (N, OC), wt read as held
  auto xt = OSPREY_TRY(transpose(h, x, N, IC));                  // (IC, N)
  auto outT = OSPREY_TRY(h.matMul(wt, xt, OC, IC, N));           // (OC, N)
  return transpose(h, outT, OC, N);                              // (N, OC)
}

// dx (N, IC), dw (IC, OC), dbias (OC) from dout (N, OC), the forward's x (N, IC), w (IC, OC).
//   dx = dout . wᵀ  (as (w . doutᵀ)ᵀ),   dw = xᵀ . dout (n ascending),   dbias[o] = sum_n dout[n][o]
template <osprey::Tensor H>
osprey::Result<MatmulGrads<H>> matmulBackward(H& h, const Buf<H>& dout, const Buf<H>& x,
                                              const Buf<H>& w, osprey::Index N, osprey::Index IC,
                                              osprey::Index OC) {
  const char* L = "matmul backward";
  OSPREY_CHECK(checkLength(h, dout, OSPREY_TRY(checkedProduct(L, {N, OC})), L, "dout"));
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct(L, {N, IC})), L, "x"));
  OSPREY_CHECK(checkLength(h, w, OSPREY_TRY(checkedProduct(L, {IC, OC})), L, "weight"));
  if constexpr (TakesTransposedOperands<H>) {
    // The same three results with no copy: dx = dout · wᵀ with w read as held (IC, OC), dw = xᵀ ·
    // dout with x read as held (N, IC), and dbias as the product 1 (1, N) · dout: its chain
    // fma(1, dout[n][o], acc) rounds 1·dout[n][o] + acc, which is acc + dout[n][o] exactly, the
    // fold's sum in the fold's order.
    auto dx = OSPREY_TRY(h.matMulTransposed(dout, w, N, OC, IC, osprey::Transposed::B));  // (N, IC)
    auto dw = OSPREY_TRY(h.matMulTransposed(x, dout, IC, N, OC, osprey::Transposed::A));  // (IC, OC)
    auto ones = OSPREY_TRY(h.build(N, [] OSPREY_FN(KernelIndex<H>) -> KernelScalar<H> { return 1.0; }));
    auto dbias = OSPREY_TRY(h.matMul(ones, dout, 1, N, OC));                              // (OC)
    return MatmulGrads<H>{std::move(dx), std::move(dw), std::move(dbias)};
  }
  auto doutT = OSPREY_TRY(transpose(h, dout, N, OC));            // (OC, N)
  auto dxT = OSPREY_TRY(h.matMul(w, doutT, IC, OC, N));          // (IC, N)
  auto dx = OSPREY_TRY(transpose(h, dxT, IC, N));                // (N, IC)
  auto xT = OSPREY_TRY(transpose(h, x, N, IC));                  // (IC, N)
  auto dw = OSPREY_TRY(h.matMul(xT, dout, IC, N, OC));           // (IC, OC)
  // dbias[o] = dout summed down column o, n ascending from 0.0: doutT holds that column as a
  // contiguous row, so it is a row fold (which a device may spread over a block per row).
  const auto dtv = doutT.view();
  const osprey::Int Ni = N;
  auto dbias = OSPREY_TRY(sumRows(h, OC, N,
      [=] OSPREY_FN(KernelIndex<H> o, KernelIndex<H> n) -> KernelScalar<H> { return dtv[osprey::asInt(o) * Ni + n]; },
      AsIs{}));
  return MatmulGrads<H>{std::move(dx), std::move(dw), std::move(dbias)};
}

// dx (N, IC), dwt (OC, IC) from dout (N, OC), the forward's x (N, IC), wt (OC, IC).
//   dx = dout . wt (a plain product),   dwt = doutᵀ . x (n ascending)
template <osprey::Tensor H>
osprey::Result<MatmulTransposedGrads<H>> matmulBackwardTransposed(H& h, const Buf<H>& dout,
                                                                  const Buf<H>& x, const Buf<H>& wt,
                                                                  osprey::Index N, osprey::Index IC,
                                                                  osprey::Index OC) {
  const char* L = "matmul (transposed weight) backward";
  OSPREY_CHECK(checkLength(h, dout, OSPREY_TRY(checkedProduct(L, {N, OC})), L, "dout"));
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct(L, {N, IC})), L, "x"));
  OSPREY_CHECK(checkLength(h, wt, OSPREY_TRY(checkedProduct(L, {OC, IC})), L, "weight"));
  auto dx = OSPREY_TRY(h.matMul(dout, wt, N, OC, IC));           // (N, IC)
  if constexpr (TakesTransposedOperands<H>) {
    auto dwt = OSPREY_TRY(h.matMulTransposed(dout, x, OC, N, IC, osprey::Transposed::A));  // dout read as held
    return MatmulTransposedGrads<H>{std::move(dx), std::move(dwt)};
  }
  auto doutT = OSPREY_TRY(transpose(h, dout, N, OC));            // (OC, N)
  auto dwt = OSPREY_TRY(h.matMul(doutT, x, OC, N, IC));          // (OC, IC)
  return MatmulTransposedGrads<H>{std::move(dx), std::move(dwt)};
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<Buf<H>> matmulForward(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& bias,
                                     osprey::Index N, osprey::Index IC, osprey::Index OC) {
  OSPREY_GPT2_DERIVED(matmulForward, x, w, bias, N, IC, OC)
  return reference::matmulForward(h, x, w, bias, N, IC, OC);
}

template <osprey::Tensor H>
osprey::Result<Buf<H>> matmulForwardTransposed(H& h, const Buf<H>& x, const Buf<H>& wt,
                                               osprey::Index N, osprey::Index IC, osprey::Index OC) {
  OSPREY_GPT2_DERIVED(matmulForwardTransposed, x, wt, N, IC, OC)
  return reference::matmulForwardTransposed(h, x, wt, N, IC, OC);
}

template <osprey::Tensor H>
osprey::Result<MatmulGrads<H>> matmulBackward(H& h, const Buf<H>& dout, const Buf<H>& x,
                                              const Buf<H>& w, osprey::Index N, osprey::Index IC,
                                              osprey::Index OC) {
  OSPREY_GPT2_DERIVED(matmulBackward, dout, x, w, N, IC, OC)
  return reference::matmulBackward(h, dout, x, w, N, IC, OC);
}

template <osprey::Tensor H>
osprey::Result<MatmulTransposedGrads<H>> matmulBackwardTransposed(H& h, const Buf<H>& dout,
                                                                  const Buf<H>& x, const Buf<H>& wt,
                                                                  osprey::Index N, osprey::Index IC,
                                                                  osprey::Index OC) {
  OSPREY_GPT2_DERIVED(matmulBackwardTransposed, dout, x, wt, N, IC, OC)
  return reference::matmulBackwardTransposed(h, dout, x, wt, N, IC, OC);
}

}  // namespace gpt2
