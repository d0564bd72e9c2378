// A width-4 GPT-2 transformer block, written once against the Tensor effect.
//
// This is the foundation's end-to-end check (issue 2): small enough to compare every element of
// every intermediate with an independent float64 oracle (tools/oracle/block_reference.py, and
// tools/oracle/block.py in PyTorch), and built from the same primitives GPT-2 uses, so running
// it under lists and gpu(host) and comparing bit patterns tests the handlers, not the model.
// It deliberately is NOT the GPT-2 layer library (gpt2/layers): it is a second,
// independent spelling of one block, kept minimal.
//
// Dimension legend (all tensors row-major):
//   T = 5 positions   C = 4 channels   NH = 2 heads   HS = C / NH = 2 (one head's width)
//
//   ln1   = LayerNorm(x; ln_1)                                      (T, C)
//   qkv   = ln1 . Wqkv + bqkv       Wqkv (C, 3C), HF Conv1D layout   (T, 3C): [q | k | v]
//   att   = softmax_s(q_t . k_s / sqrt(HS)), s <= t, per head        (NH, T, T), 0 where s > t
//   attnY = sum_s att[h][t][s] * v_s, heads side by side             (T, C)
//   proj  = attnY . Wproj + bproj                                    (T, C)
//   x1    = x + proj                                                 (T, C)
//   ln2   = LayerNorm(x1; ln_2)                                      (T, C)
//   fc    = ln2 . Wfc + bfc                                          (T, 4C)
//   gelu  = 0.5 fc (1 + tanh(sqrt(2/pi) (fc + 0.044715 fc^3)))       (T, 4C)
//   mlp   = gelu . Wmlp + bmlp                                       (T, C)
//   out   = x1 + mlp                                                 (T, C)
//
// Numerics: every sum runs in index order from 0.0; every sum of products is a chain of fused
// multiply-adds (osprey::math::fma) in that order, as matMul's are, and nothing else is fused;
// exp/tanh/sqrt come from osprey::math (one implementation for host and device). Index maths uses the checked Int.
// Kernels live in named function templates with explicit return types (nvcc's rule for
// __host__ __device__ lambdas).
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

#include "osprey/config.hpp"
#include "osprey/effect.hpp"
#include "osprey/math.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#include "osprey/view.hpp"

namespace block {

using osprey::Index;
using osprey::Int;
using osprey::Result;
using osprey::Scalar;

inline constexpr Index T = 5;
inline constexpr Index C = 4;
inline constexpr Index NH = 2;
inline constexpr Index HS = C / NH;
inline constexpr Scalar kLayerNormEps = 1e-5;
inline constexpr Scalar kGeluScale = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr Scalar kGeluCubic = 0.044715;

template <osprey::Tensor H>
using Buf = typename H::Buffer;

// The block's parameters, named as in a Hugging Face GPT-2 layer (`h.0.` prefix dropped).
template <osprey::Tensor H>
struct Params {
  Buf<H> ln1Weight, ln1Bias;    // ln_1.weight, ln_1.bias              (C), (C)
  Buf<H> qkvWeight, qkvBias;    // attn.c_attn.weight, .bias           (C, 3C), (3C)
  Buf<H> projWeight, projBias;  // attn.c_proj.weight, .bias           (C, C), (C)
  Buf<H> ln2Weight, ln2Bias;    // ln_2.weight, ln_2.bias              (C), (C)
  Buf<H> fcWeight, fcBias;      // mlp.c_fc.weight, .bias              (C, 4C), (4C)
  Buf<H> mlpWeight, mlpBias;    // mlp.c_proj.weight, .bias            (4C, C), (C)
};

// Every intermediate, so a mismatch with the oracle points at the stage that caused it.
template <osprey::Tensor H>
struct Outputs {
  Buf<H> ln1;    // (T, C)
  Buf<H> qkv;    // (T, 3C)
  Buf<H> att;    // (NH, T, T) attention probabilities, 0 above the diagonal
  Buf<H> attnY;  // (T, C)
  Buf<H> proj;   // (T, C)
  Buf<H> x1;     // (T, C)
  Buf<H> ln2;    // (T, C)
  Buf<H> fc;     // (T, 4C)
  Buf<H> gelu;   // (T, 4C)
  Buf<H> mlp;    // (T, C)
  Buf<H> out;    // (T, C)
};

// A tensor must hold `expected` elements; the error names it.
template <osprey::Tensor H>
Result<void> expectLength(H& h, const Buf<H>& b, Index expected, const char* name) {
  if (h.length(b) != expected)
    return osprey::Error{fmt::format("block: {} has {} elements, expected {}", name, h.length(b), expected)};
  return {};
}

// ---- LayerNorm ----------------------------------------------------------------------------------

// mean[r] = (sum_c x[r][c]) / width                                  (rows)
template <osprey::Tensor H>
Result<Buf<H>> rowMeans(H& h, const Buf<H>& x, Index rows, Index width) {
  const auto xv = x.view();
  const Int W = width;
  return h.build(rows, [=] OSPREY_FN(Index r) -> Scalar {
    Scalar acc = 0.0;
    for (Int c = 0; c < W; ++c) acc = acc + xv[Int(r) * W + c];
    return acc / static_cast<Scalar>(W.raw());
  });
}

// rstd[r] = 1 / sqrt((sum_c (x[r][c] - mean[r])^2) / width + eps)   (rows), biased variance
template <osprey::Tensor H>
Result<Buf<H>> rowInverseStd(H& h, const Buf<H>& x, const Buf<H>& mean, Index rows, Index width) {
  const auto xv = x.view(), mv = mean.view();
  const Int W = width;
  const Scalar eps = kLayerNormEps;
  return h.build(rows, [=] OSPREY_FN(Index r) -> Scalar {
    Scalar acc = 0.0;
    for (Int c = 0; c < W; ++c) {
      const Scalar d = xv[Int(r) * W + c] - mv[r];
      acc = osprey::math::fma(d, d, acc);
    }
    return 1.0 / osprey::math::sqrt(acc / static_cast<Scalar>(W.raw()) + eps);
  });
}

// out[r][c] = ((x[r][c] - mean[r]) * rstd[r]) * g[c] + b[c]         (rows, width)
template <osprey::Tensor H>
Result<Buf<H>> normalise(H& h, const Buf<H>& x, const Buf<H>& mean, const Buf<H>& rstd,
                         const Buf<H>& g, const Buf<H>& b, Index rows, Index width) {
  const auto xv = x.view(), mv = mean.view(), sv = rstd.view(), gv = g.view(), bv = b.view();
  const Int W = width;
  return h.build((Int(rows) * W).raw(), [=] OSPREY_FN(Index i) -> Scalar {
    const Int r = Int(i) / W, c = Int(i) % W;
    return ((xv[i] - mv[r]) * sv[r]) * gv[c] + bv[c];
  });
}

template <osprey::Tensor H>
Result<Buf<H>> layerNorm(H& h, const Buf<H>& x, const Buf<H>& g, const Buf<H>& b, Index rows, Index width) {
  auto mean = OSPREY_TRY(rowMeans(h, x, rows, width));
  auto rstd = OSPREY_TRY(rowInverseStd(h, x, mean, rows, width));
  return normalise(h, x, mean, rstd, g, b, rows, width);
}

// ---- linear layers and element-wise stages ------------------------------------------------------

// y[r][o] = x[r][o] + bias[o]                                        (rows, width)
template <osprey::Tensor H>
Result<Buf<H>> addBias(H& h, const Buf<H>& x, const Buf<H>& bias, Index width) {
  const auto xv = x.view(), bv = bias.view();
  const Int W = width;
  return h.build(h.length(x), [=] OSPREY_FN(Index i) -> Scalar { return xv[i] + bv[Int(i) % W]; });
}

// y = x . W + b, W in Conv1D (in, out) layout                        (rows, out)
template <osprey::Tensor H>
Result<Buf<H>> linear(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& b, Index rows, Index in, Index out) {
  auto xw = OSPREY_TRY(h.matMul(x, w, rows, in, out));
  return addBias(h, xw, b, out);
}

// GELU, tanh form; x^3 as (x * x) * x.
template <osprey::Tensor H>
Result<Buf<H>> gelu(H& h, const Buf<H>& x) {
  const auto xv = x.view();
  return h.build(h.length(x), [=] OSPREY_FN(Index i) -> Scalar {
    const Scalar v = xv[i];
    const Scalar u = kGeluScale * (v + kGeluCubic * ((v * v) * v));
    return (0.5 * v) * (1.0 + osprey::math::tanh(u));
  });
}

// a + b: the residual connection.
template <osprey::Tensor H>
Result<Buf<H>> residual(H& h, const Buf<H>& a, const Buf<H>& b) {
  return h.zipWith(a, b, [=] OSPREY_FN(Scalar x, Scalar y) -> Scalar { return x + y; });
}

// ---- causal self-attention ----------------------------------------------------------------------
// Attention rows are indexed (h, t) -> h * T + t; scores and probabilities (h, t, s) -> (h*T + t)*T + s.

// score[h][t][s] = (sum_d q[t][h*HS+d] * k[s][h*HS+d]) / sqrt(HS) for s <= t; 0 (unused) above.
template <osprey::Tensor H>
Result<Buf<H>> attentionScores(H& h, const Buf<H>& qkv) {
  const auto qv = qkv.view();
  const Int Ti = T, C3 = 3 * C, Ci = C, HSi = HS;
  const Scalar scale = 1.0 / osprey::math::sqrt(static_cast<Scalar>(HS));
  return h.build(NH * T * T, [=] OSPREY_FN(Index i) -> Scalar {
    const Int head = Int(i) / (Ti * Ti), t = (Int(i) / Ti) % Ti, s = Int(i) % Ti;
    if (s > t) return 0.0;
    Scalar dot = 0.0;
    for (Int d = 0; d < HSi; ++d)
      dot = osprey::math::fma(qv[t * C3 + head * HSi + d], qv[s * C3 + Ci + head * HSi + d], dot);
    return dot * scale;
  });
}

// max_{s <= t} score[h][t][s]                                       (NH, T)
template <osprey::Tensor H>
Result<Buf<H>> attentionRowMax(H& h, const Buf<H>& scores) {
  const auto sv = scores.view();
  const Int Ti = T;
  return h.build(NH * T, [=] OSPREY_FN(Index row) -> Scalar {
    const Int t = Int(row) % Ti, base = Int(row) * Ti;
    Scalar m = sv[base];
    for (Int s = 1; s <= t; ++s) m = sv[base + s] > m ? sv[base + s] : m;
    return m;
  });
}

// e[h][t][s] = exp(score - rowMax) for s <= t, else 0               (NH, T, T)
template <osprey::Tensor H>
Result<Buf<H>> attentionExp(H& h, const Buf<H>& scores, const Buf<H>& rowMax) {
  const auto sv = scores.view(), mv = rowMax.view();
  const Int Ti = T;
  return h.build(NH * T * T, [=] OSPREY_FN(Index i) -> Scalar {
    const Int row = Int(i) / Ti, t = row % Ti, s = Int(i) % Ti;
    return s > t ? 0.0 : osprey::math::exp(sv[i] - mv[row]);
  });
}

// sum_{s <= t} e[h][t][s], s ascending                              (NH, T)
template <osprey::Tensor H>
Result<Buf<H>> attentionRowSum(H& h, const Buf<H>& e) {
  const auto ev = e.view();
  const Int Ti = T;
  return h.build(NH * T, [=] OSPREY_FN(Index row) -> Scalar {
    const Int t = Int(row) % Ti, base = Int(row) * Ti;
    Scalar acc = 0.0;
    for (Int s = 0; s <= t; ++s) acc = acc + ev[base + s];
    return acc;
  });
}

// att = e / rowSum                                                  (NH, T, T)
template <osprey::Tensor H>
Result<Buf<H>> attentionNormalise(H& h, const Buf<H>& e, const Buf<H>& rowSum) {
  const auto ev = e.view(), zv = rowSum.view();
  const Int Ti = T;
  return h.build(NH * T * T, [=] OSPREY_FN(Index i) -> Scalar { return ev[i] / zv[Int(i) / Ti]; });
}

// y[t][h*HS+d] = sum_{s <= t} att[h][t][s] * v[s][h*HS+d], s ascending   (T, C)
template <osprey::Tensor H>
Result<Buf<H>> attentionMix(H& h, const Buf<H>& att, const Buf<H>& qkv) {
  const auto av = att.view(), qv = qkv.view();
  const Int Ti = T, Ci = C, C3 = 3 * C, HSi = HS;
  return h.build(T * C, [=] OSPREY_FN(Index i) -> Scalar {
    const Int t = Int(i) / Ci, c = Int(i) % Ci, head = c / HSi;
    const Int row = head * Ti + t;
    Scalar acc = 0.0;
    for (Int s = 0; s <= t; ++s) acc = osprey::math::fma(av[row * Ti + s], qv[s * C3 + Ci * 2 + c], acc);
    return acc;
  });
}

// ---- the block ----------------------------------------------------------------------------------

template <osprey::Tensor H>
Result<void> checkShapes(H& h, const Buf<H>& x, const Params<H>& p) {
  OSPREY_CHECK(expectLength(h, x, T * C, "x"));
  OSPREY_CHECK(expectLength(h, p.ln1Weight, C, "ln_1.weight"));
  OSPREY_CHECK(expectLength(h, p.ln1Bias, C, "ln_1.bias"));
  OSPREY_CHECK(expectLength(h, p.qkvWeight, C * 3 * C, "attn.c_attn.weight"));
  OSPREY_CHECK(expectLength(h, p.qkvBias, 3 * C, "attn.c_attn.bias"));
  OSPREY_CHECK(expectLength(h, p.projWeight, C * C, "attn.c_proj.weight"));
  OSPREY_CHECK(expectLength(h, p.projBias, C, "attn.c_proj.bias"));
  OSPREY_CHECK(expectLength(h, p.ln2Weight, C, "ln_2.weight"));
  OSPREY_CHECK(expectLength(h, p.ln2Bias, C, "ln_2.bias"));
  OSPREY_CHECK(expectLength(h, p.fcWeight, C * 4 * C, "mlp.c_fc.weight"));
  OSPREY_CHECK(expectLength(h, p.fcBias, 4 * C, "mlp.c_fc.bias"));
  OSPREY_CHECK(expectLength(h, p.mlpWeight, 4 * C * C, "mlp.c_proj.weight"));
  OSPREY_CHECK(expectLength(h, p.mlpBias, C, "mlp.c_proj.bias"));
  return {};
}

// One pre-LayerNorm block: x (T, C) -> out (T, C), with every intermediate.
template <osprey::Tensor H>
Result<Outputs<H>> forward(H& h, const Buf<H>& x, const Params<H>& p) {
  OSPREY_CHECK(checkShapes(h, x, p));
  auto ln1 = OSPREY_TRY(layerNorm(h, x, p.ln1Weight, p.ln1Bias, T, C));
  auto qkv = OSPREY_TRY(linear(h, ln1, p.qkvWeight, p.qkvBias, T, C, 3 * C));
  auto scores = OSPREY_TRY(attentionScores(h, qkv));
  auto rowMax = OSPREY_TRY(attentionRowMax(h, scores));
  auto e = OSPREY_TRY(attentionExp(h, scores, rowMax));
  auto rowSum = OSPREY_TRY(attentionRowSum(h, e));
  auto att = OSPREY_TRY(attentionNormalise(h, e, rowSum));
  auto attnY = OSPREY_TRY(attentionMix(h, att, qkv));
  auto proj = OSPREY_TRY(linear(h, attnY, p.projWeight, p.projBias, T, C, C));
  auto x1 = OSPREY_TRY(residual(h, x, proj));
  auto ln2 = OSPREY_TRY(layerNorm(h, x1, p.ln2Weight, p.ln2Bias, T, C));
  auto fc = OSPREY_TRY(linear(h, ln2, p.fcWeight, p.fcBias, T, C, 4 * C));
  auto act = OSPREY_TRY(gelu(h, fc));
  auto mlp = OSPREY_TRY(linear(h, act, p.mlpWeight, p.mlpBias, T, 4 * C, C));
  auto out = OSPREY_TRY(residual(h, x1, mlp));
  return Outputs<H>{std::move(ln1), std::move(qkv), std::move(att), std::move(attnY), std::move(proj),
                    std::move(x1),  std::move(ln2), std::move(fc),  std::move(act),   std::move(mlp),
                    std::move(out)};
}

}  // namespace block
