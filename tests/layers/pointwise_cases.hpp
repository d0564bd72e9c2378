// GELU and residual cases, generic over the handler.
#pragma once

#include "layers/layer_support.hpp"

namespace gpt2::testing::pointwise_cases {

inline Scalar referenceGelu(Scalar x) {
  const Scalar pi = 3.14159265358979323846;
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

template <class H>
void geluMatchesLoop(H& h) {
  auto x = randomValues(257, 171, -6.0, 6.0);
  x.push_back(0.0);
  x.push_back(-30.0);
  x.push_back(30.0);
  std::vector<Scalar> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = referenceGelu(x[i]);
  const auto got = readAll(h, must(geluForward(h, lift(h, x))));
  expectClose(got, want, kForwardRtol, kForwardAtol, "gelu");
  EXPECT_EQ(got[257], 0.0);
  EXPECT_EQ(got[259], 30.0);  // tanh saturates to 1
}

template <class H>
void geluBackwardMatchesFiniteDifferences(H& h) {
  const auto x = randomValues(31, 181, -4.0, 4.0), r = randomValues(31, 182);
  auto dx = must(geluBackward(h, lift(h, r), lift(h, x)));
  auto loss = [&](const std::vector<Scalar>& v) { return weightedSum(readAll(h, must(geluForward(h, lift(h, v)))), r); };
  expectClose(readAll(h, dx), numericGradient(x, loss), kGradRtol, kGradAtol, "gelu dx");
}

template <class H>
void residualAddsAndPassesGradientThrough(H& h) {
  const auto a = randomValues(33, 191), b = randomValues(33, 192);
  const auto got = readAll(h, must(residualForward(h, lift(h, a), lift(h, b))));
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(got[i], a[i] + b[i]);
  auto d = lift(h, randomValues(33, 193));
  auto g = must(residualBackward(h, d));
  EXPECT_EQ(readAll(h, g.da), readAll(h, d));
  EXPECT_EQ(readAll(h, g.db), readAll(h, d));
  expectError(residualForward(h, lift(h, a), lift(h, randomValues(32, 194))), "b has 32 elements, expected 33");
}

// The residual pairs (layers/residual.hpp) are their two layers one after the other, bit for bit:
// x + (in · w + bias), and the LayerNorm backward with dresid added onto dx. A residual stream of
// the wrong shape is an error that names it.
template <class H>
void residualPairsAreTheirTwoLayers(H& h) {
  const Index N = 5, IC = 7, C = 6;
  auto x = lift(h, randomValues(N * C, 195)), in = lift(h, randomValues(N * IC, 196));
  auto w = lift(h, randomValues(IC * C, 197)), bias = lift(h, randomValues(C, 198));
  const auto forward = readAll(h, must(residualMatmulForward(h, x, in, w, bias, N, IC, C)));
  EXPECT_EQ(forward, readAll(h, must(residualForward(h, x, must(matmulForward(h, in, w, bias, N, IC, C))))));
  const auto xs = readAll(h, x);
  EXPECT_NE(forward, xs);
  expectError(residualMatmulForward(h, lift(h, randomValues(N * C - 1, 199)), in, w, bias, N, IC, C),
              "residual matmul: x has 29 elements, expected 30");

  auto gain = lift(h, randomValues(C, 203));
  auto ln = must(layernormForward(h, x, gain, bias, N, C));
  auto dout = lift(h, randomValues(N * C, 200)), dresid = lift(h, randomValues(N * C, 201));
  const auto fused = must(residualLayernormBackward(h, dresid, dout, x, gain, ln.mean, ln.rstd, N, C));
  const auto plain = must(layernormBackward(h, dout, x, gain, ln.mean, ln.rstd, N, C));
  EXPECT_EQ(readAll(h, fused.dx), readAll(h, must(add(h, dresid, plain.dx))));
  EXPECT_EQ(readAll(h, fused.dw), readAll(h, plain.dw));
  EXPECT_EQ(readAll(h, fused.db), readAll(h, plain.db));
  expectError(residualLayernormBackward(h, lift(h, randomValues(N * C + 1, 202)), dout, x, gain, ln.mean, ln.rstd, N, C),
              "dresid has 31 elements, expected 30");
}

// The linear layer in front of GELU and GELU (layers/projected.hpp) are those two layers one
// after the other, bit for bit, and so is the backward pair of the projection after GELU and
// GELU's backward; an operand of the wrong shape is an error that names it.
template <class H>
void projectedGeluIsItsTwoLayers(H& h) {
  const Index N = 5, IC = 7, OC = 12;
  auto x = lift(h, randomValues(N * IC, 204)), w = lift(h, randomValues(IC * OC, 205));
  auto bias = lift(h, randomValues(OC, 206));
  const auto pair = must(matmulGeluForward(h, x, w, bias, N, IC, OC));
  const auto fc = must(matmulForward(h, x, w, bias, N, IC, OC));
  EXPECT_EQ(readAll(h, pair.fc), readAll(h, fc));
  EXPECT_EQ(readAll(h, pair.gelu), readAll(h, must(geluForward(h, fc))));
  expectError(matmulGeluForward(h, x, w, lift(h, randomValues(OC + 1, 207)), N, IC, OC),
              "bias has 13 elements, expected 12");

  // The backward pair: the projection after GELU, then GELU's backward.
  auto dout = lift(h, randomValues(N * IC, 208)), wp = lift(h, randomValues(OC * IC, 209));
  const auto back = must(geluMatmulBackward(h, dout, pair.gelu, wp, pair.fc, N, OC, IC));
  const auto m = must(matmulBackward(h, dout, pair.gelu, wp, N, OC, IC));
  EXPECT_EQ(readAll(h, back.df), readAll(h, must(geluBackward(h, m.dx, pair.fc))));
  EXPECT_EQ(readAll(h, back.dw), readAll(h, m.dw));
  EXPECT_EQ(readAll(h, back.dbias), readAll(h, m.dbias));
  expectError(geluMatmulBackward(h, dout, pair.gelu, wp, lift(h, randomValues(N * OC - 1, 210)), N, OC, IC),
              "dout has 60 elements, expected 59");
}

}  // namespace gpt2::testing::pointwise_cases
