// LayerNorm over the channels of each row, and its backward.
//
//   mean[n] = (sum_c x[n][c]) / C                         (c ascending, from 0.0)
//   var[n]  = (sum_c (x[n][c] - mean[n])^2) / C           (biased, as PyTorch's LayerNorm; a dot
//                                                          product of the deviations with themselves,
//                                                          fused multiply-adds in c order)
//   rstd[n] = 1 / sqrt(var[n] + 1e-5)
//   out[n][c] = ((x[n][c] - mean[n]) * rstd[n]) * w[c] + b[c]
//
// Row statistics are computed once per row into (N) buffers and then read by the element
// kernels, so the work is O(N*C), not O(N*C*C).
#pragma once

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/fold_rows.hpp"

namespace gpt2 {

inline constexpr osprey::Scalar kLayerNormEps = 1e-5;

template <class H>
struct LayerNormOut {
  Buf<H> out;   // (N, C)
  Buf<H> mean;  // (N)
  Buf<H> rstd;  // (N) 1 / sqrt(var + eps)
};

template <class H>
struct LayerNormGrads {
  Buf<H> dx;  // (N, C)
  Buf<H> dw;  // (C)
  Buf<H> db;  // (C)
};

// The variance's term: a value's deviation from the mean, twice, for the dot fold that squares and
// adds it with one rounding.
template <class S>
OSPREY_FN ProductOf<S> squaredDeviation(S mean, S v) {
  const S d = v - mean;
  return {d, d};
}

namespace detail {
// The forward's operands against N rows of C channels: N·C elements (the count returned) for x, C
// for w and b; each error names the tensor.
template <osprey::Tensor H>
osprey::Result<osprey::Index> checkLayernormForward(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& b,
                                                    osprey::Index N, osprey::Index C) {
  const char* L = "layernorm";
  const osprey::Index NC = OSPREY_TRY(checkedProduct(L, {N, C}));
  OSPREY_CHECK(checkLength(h, x, NC, L, "x"));
  OSPREY_CHECK(checkLength(h, w, C, L, "weight"));
  OSPREY_CHECK(checkLength(h, b, C, L, "bias"));
  return NC;
}

// The backward's operands against N rows of C channels: N·C elements (the count returned) for
// dout and x, C for w, N for mean and rstd; each error names the tensor.
template <osprey::Tensor H>
osprey::Result<osprey::Index> checkLayernormBackward(H& h, const Buf<H>& dout, const Buf<H>& x, const Buf<H>& w,
                                                     const Buf<H>& mean, const Buf<H>& rstd, osprey::Index N,
                                                     osprey::Index C) {
  const char* L = "layernorm backward";
  const osprey::Index NC = OSPREY_TRY(checkedProduct(L, {N, C}));
  OSPREY_CHECK(checkLength(h, dout, NC, L, "dout"));
  OSPREY_CHECK(checkLength(h, x, NC, L, "x"));
  OSPREY_CHECK(checkLength(h, w, C, L, "weight"));
  OSPREY_CHECK(checkLength(h, mean, N, L, "mean"));
  OSPREY_CHECK(checkLength(h, rstd, N, L, "rstd"));
  return NC;
}

template <class H>
struct LayerNormParamGrads {
  Buf<H> dw;  // (C)
  Buf<H> db;  // (C)
};
// dw[c] = sum_n norm * dout and db[c] = sum_n dout (n ascending, from 0.0): column sums over the
// rows, row c of each fold being column c of the gradients. Shared by the reference backward and
// a handler that answers the per-row part itself (gpt2/cuda/layernorm_rows.hpp). The lengths are
// the caller's to check.
template <osprey::Tensor H>
osprey::Result<LayerNormParamGrads<H>> layernormParamGrads(H& h, const Buf<H>& dout, const Buf<H>& x,
                                                           const Buf<H>& mean, const Buf<H>& rstd, osprey::Index N,
                                                           osprey::Index C) {
  const auto dv = dout.view(), xv = x.view(), mv = mean.view(), rv = rstd.view();
  const osprey::Int Ci = C;
  auto dw = OSPREY_TRY(dotRows(h, C, N,
      [=] OSPREY_FN(KernelIndex<H> c, KernelIndex<H> n) -> ProductOf<KernelScalar<H>> {
        const auto i = osprey::asInt(n) * Ci + c;
        const auto norm = (xv[i] - mv[n]) * rv[n];
        return {norm, dv[i]};
      },
      AsIs{}));
  auto db = OSPREY_TRY(sumRows(h, C, N,
      [=] OSPREY_FN(KernelIndex<H> c, KernelIndex<H> n) -> KernelScalar<H> { return dv[osprey::asInt(n) * Ci + c]; },
      AsIs{}));
  return LayerNormParamGrads<H>{std::move(dw), std::move(db)};
}
}  // namespace detail

namespace reference {

// out (N, C), mean (N), rstd (N) from x (N, C), w (C), b (C).
template <osprey::Tensor H>
osprey::Result<LayerNormOut<H>> layernormForward(H& h, const Buf<H>& x, const Buf<H>& w,
                                                 const Buf<H>& b, osprey::Index N, osprey::Index C) {
  const char* L = "layernorm";
  const osprey::Index NC = OSPREY_TRY(detail::checkLayernormForward(h, x, w, b, N, C));
  if (C <= 0) return osprey::Error{fmt::format("{}: channels must be positive, got {}", L, C)};
  const auto xv = x.view(), wv = w.view(), bv = b.view();
  const osprey::Int Ci = C;
  const auto Cs = static_cast<osprey::Scalar>(C);
  const osprey::Scalar eps = kLayerNormEps;

  // Rows [n·C, (n+1)·C) lie in x: its length N·C was checked above.
  auto mean = OSPREY_TRY(sumRows(h, N, C,
      [=] OSPREY_FN(KernelIndex<H> n, KernelIndex<H> c) -> KernelScalar<H> {
        return xv[osprey::asInt(n) * Ci + c];
      },
      [=] OSPREY_FN(KernelIndex<H>, KernelScalar<H> sum) -> KernelScalar<H> { return sum / Cs; }));
  const auto mv = mean.view();
  auto rstd = OSPREY_TRY(dotRows(h, N, C,
      [=] OSPREY_FN(KernelIndex<H> n, KernelIndex<H> c) -> ProductOf<KernelScalar<H>> {
        return squaredDeviation<KernelScalar<H>>(mv[n], xv[osprey::asInt(n) * Ci + c]);
      },
      [=] OSPREY_FN(KernelIndex<H>, KernelScalar<H> sum) -> KernelScalar<H> {
        return 1.0 / osprey::math::sqrt(sum / Cs + eps);
      }));
  const auto rv = rstd.view();
  auto out = OSPREY_TRY(h.build(NC, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto nC = divMod(osprey::asInt(i), Ci);
    const auto n = nC.q, c = nC.r;
    const auto norm = (xv[i] - mv[n]) * rv[n];
    return norm * wv[c] + bv[c];
  }));
  return LayerNormOut<H>{std::move(out), std::move(mean), std::move(rstd)};
}

// dx (N, C), dw (C), db (C) from dout (N, C), the forward's x (N, C), w (C), mean (N), rstd (N).
//
//   norm = (x - mean) * rstd,  dnorm = w * dout
//   dx = ((dnorm - mean_c(dnorm)) - norm * mean_c(dnorm * norm)) * rstd
//   dw[c] = sum_n norm * dout,  db[c] = sum_n dout   (n ascending, from 0.0)
// The sums of products (dnorm * norm, norm * dout) are dot products: fused multiply-adds in order.
template <osprey::Tensor H>
osprey::Result<LayerNormGrads<H>> layernormBackward(H& h, const Buf<H>& dout, const Buf<H>& x,
                                                    const Buf<H>& w, const Buf<H>& mean,
                                                    const Buf<H>& rstd, osprey::Index N,
                                                    osprey::Index C) {
  const char* L = "layernorm backward";
  const osprey::Index NC = OSPREY_TRY(detail::checkLayernormBackward(h, dout, x, w, mean, rstd, N, C));
  if (C <= 0) return osprey::Error{fmt::format("{}: channels must be positive, got {}", L, C)};
  const auto dv = dout.view(), xv = x.view(), wv = w.view(), mv = mean.view(), rv = rstd.view();
  const osprey::Int Ci = C;
  const auto Cs = static_cast<osprey::Scalar>(C);

  // Per row: element 2n = mean_c(dnorm), element 2n+1 = mean_c(dnorm * norm). One dot fold for
  // both: dnorm's sum as fma(dnorm, 1.0, acc), which is acc + dnorm exactly (one rounding of the
  // same exact sum).
  auto stats = OSPREY_TRY(dotRows(h, OSPREY_TRY(checkedProduct(L, {N, 2})), C,
      [=] OSPREY_FN(KernelIndex<H> i, KernelIndex<H> c) -> ProductOf<KernelScalar<H>> {
        const auto nWhich = divMod(osprey::asInt(i), osprey::Int(2));
        const auto n = nWhich.q, which = nWhich.r;
        const auto at = n * Ci + c;
        const auto dnorm = wv[c] * dv[at];
        return {dnorm, osprey::when(
                           which == 0, [&] { return KernelScalar<H>(1.0); },
                           [&] { return KernelScalar<H>((xv[at] - mv[n]) * rv[n]); })};
      },
      [=] OSPREY_FN(KernelIndex<H>, KernelScalar<H> sum) -> KernelScalar<H> { return sum / Cs; }));
  const auto sv = stats.view();
  auto dx = OSPREY_TRY(h.build(NC, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto nC = divMod(osprey::asInt(i), Ci);
    const auto n = nC.q, c = nC.r;
    const auto s = rv[n];
    const auto norm = (xv[i] - mv[n]) * s;
    const auto dnorm = wv[c] * dv[i];
    return ((dnorm - sv[n * 2]) - norm * sv[n * 2 + 1]) * s;
  }));
  auto params = OSPREY_TRY(detail::layernormParamGrads(h, dout, x, mean, rstd, N, C));
  return LayerNormGrads<H>{std::move(dx), std::move(params.dw), std::move(params.db)};
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<LayerNormOut<H>> layernormForward(H& h, const Buf<H>& x, const Buf<H>& w,
                                                 const Buf<H>& b, osprey::Index N, osprey::Index C) {
  OSPREY_GPT2_DERIVED(layernormForward, x, w, b, N, C)
  return reference::layernormForward(h, x, w, b, N, C);
}

template <osprey::Tensor H>
osprey::Result<LayerNormGrads<H>> layernormBackward(H& h, const Buf<H>& dout, const Buf<H>& x,
                                                    const Buf<H>& w, const Buf<H>& mean,
                                                    const Buf<H>& rstd, osprey::Index N,
                                                    osprey::Index C) {
  OSPREY_GPT2_DERIVED(layernormBackward, dout, x, w, mean, rstd, N, C)
  return reference::layernormBackward(h, dout, x, w, mean, rstd, N, C);
}

}  // namespace gpt2
