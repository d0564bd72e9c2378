// Linear-layer cases (Conv1D weight and the tied, transposed weight), generic over the handler.
#pragma once

#include <cmath>

#include "layers/layer_support.hpp"

namespace gpt2::testing::matmul_cases {

// out (N, OC) = x (N, IC) . w (IC, OC) [+ bias]
inline std::vector<Scalar> referenceForward(const std::vector<Scalar>& x, const std::vector<Scalar>& w,
                                            const std::vector<Scalar>* bias, Index N, Index IC, Index OC) {
  std::vector<Scalar> out(static_cast<std::size_t>(N * OC));
  for (Index n = 0; n < N; ++n)
    for (Index o = 0; o < OC; ++o) {
      Scalar acc = bias ? (*bias)[o] : 0.0;
      for (Index i = 0; i < IC; ++i) acc += x[n * IC + i] * w[i * OC + o];
      out[n * OC + o] = acc;
    }
  return out;
}

inline std::vector<Scalar> transposed(const std::vector<Scalar>& a, Index rows, Index cols) {
  std::vector<Scalar> t(a.size());
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  return t;
}

template <class H>
void forwardMatchesLoop(H& h) {
  const Index N = 5, IC = 6, OC = 7;
  const auto x = randomValues(N * IC, 71), w = randomValues(IC * OC, 72), b = randomValues(OC, 73);
  auto out = must(matmulForward(h, lift(h, x), lift(h, w), lift(h, b), N, IC, OC));
  expectClose(readAll(h, out), referenceForward(x, w, &b, N, IC, OC), kForwardRtol, kForwardAtol, "matmul out");
}

// x . wtᵀ with wt stored (OC, IC) equals x . W with W = wtᵀ, bit for bit (same sums in the same order).
template <class H>
void transposedForwardEqualsPlainProduct(H& h) {
  const Index N = 5, IC = 19, OC = 37;
  const auto x = randomValues(N * IC, 81), wt = randomValues(OC * IC, 82);
  const auto w = transposed(wt, OC, IC);
  auto got = readAll(h, must(matmulForwardTransposed(h, lift(h, x), lift(h, wt), N, IC, OC)));
  auto plain = readAll(h, must(h.matMul(lift(h, x), lift(h, w), N, IC, OC)));
  EXPECT_TRUE(osprey::testing::sameBits(got, plain));
  expectClose(got, referenceForward(x, w, nullptr, N, IC, OC), kForwardRtol, kForwardAtol, "x . wtT");
}

template <class H>
void backwardMatchesFiniteDifferences(H& h) {
  const Index N = 3, IC = 4, OC = 5;
  const auto x = randomValues(N * IC, 91), w = randomValues(IC * OC, 92), b = randomValues(OC, 93);
  const auto r = randomValues(N * OC, 94);
  auto g = must(matmulBackward(h, lift(h, r), lift(h, x), lift(h, w), N, IC, OC));
  auto loss = [&](const std::vector<Scalar>& xx, const std::vector<Scalar>& ww, const std::vector<Scalar>& bb) {
    return weightedSum(readAll(h, must(matmulForward(h, lift(h, xx), lift(h, ww), lift(h, bb), N, IC, OC))), r);
  };
  expectClose(readAll(h, g.dx), numericGradient(x, [&](const auto& v) { return loss(v, w, b); }),
              kGradRtol, kGradAtol, "matmul dx");
  expectClose(readAll(h, g.dw), numericGradient(w, [&](const auto& v) { return loss(x, v, b); }),
              kGradRtol, kGradAtol, "matmul dw");
  expectClose(readAll(h, g.dbias), numericGradient(b, [&](const auto& v) { return loss(x, w, v); }),
              kGradRtol, kGradAtol, "matmul dbias");
}

// The backward's sums are fixed-order: dx[n][i] = sum_o (o ascending), dw[i][o] = sum_n (n ascending).
template <class H>
void backwardSumsInFixedOrder(H& h) {
  const Index N = 6, IC = 5, OC = 9;
  const auto x = randomValues(N * IC, 95), w = randomValues(IC * OC, 96), d = randomValues(N * OC, 97);
  auto g = must(matmulBackward(h, lift(h, d), lift(h, x), lift(h, w), N, IC, OC));
  std::vector<Scalar> dx(N * IC), dw(IC * OC), db(OC);
  for (Index n = 0; n < N; ++n)
    for (Index i = 0; i < IC; ++i) {
      Scalar acc = 0.0;
      for (Index o = 0; o < OC; ++o) acc = std::fma(d[n * OC + o], w[i * OC + o], acc);
      dx[n * IC + i] = acc;
    }
  for (Index i = 0; i < IC; ++i)
    for (Index o = 0; o < OC; ++o) {
      Scalar acc = 0.0;
      for (Index n = 0; n < N; ++n) acc = std::fma(x[n * IC + i], d[n * OC + o], acc);
      dw[i * OC + o] = acc;
    }
  for (Index o = 0; o < OC; ++o) {
    Scalar acc = 0.0;
    for (Index n = 0; n < N; ++n) acc = acc + d[n * OC + o];
    db[o] = acc;
  }
  EXPECT_TRUE(osprey::testing::sameBits(readAll(h, g.dx), dx));
  EXPECT_TRUE(osprey::testing::sameBits(readAll(h, g.dw), dw));
  EXPECT_TRUE(osprey::testing::sameBits(readAll(h, g.dbias), db));
}

template <class H>
void transposedBackwardMatchesFiniteDifferences(H& h) {
  const Index N = 3, IC = 4, OC = 6;
  const auto x = randomValues(N * IC, 101), wt = randomValues(OC * IC, 102), r = randomValues(N * OC, 103);
  auto g = must(matmulBackwardTransposed(h, lift(h, r), lift(h, x), lift(h, wt), N, IC, OC));
  auto loss = [&](const std::vector<Scalar>& xx, const std::vector<Scalar>& ww) {
    return weightedSum(readAll(h, must(matmulForwardTransposed(h, lift(h, xx), lift(h, ww), N, IC, OC))), r);
  };
  expectClose(readAll(h, g.dx), numericGradient(x, [&](const auto& v) { return loss(v, wt); }),
              kGradRtol, kGradAtol, "matmulT dx");
  expectClose(readAll(h, g.dwt), numericGradient(wt, [&](const auto& v) { return loss(x, v); }),
              kGradRtol, kGradAtol, "matmulT dwt");
}

template <class H>
void rejectsWrongShapes(H& h) {
  auto x = lift(h, randomValues(6, 111)), w = lift(h, randomValues(6, 112)), b = lift(h, randomValues(2, 113));
  expectError(matmulForward(h, x, w, b, 2, 3, 3), "matmul: weight has 6 elements, expected 9");
  expectError(matmulForward(h, x, w, b, 3, 2, 3), "matmul: bias has 2 elements, expected 3");
}

}  // namespace gpt2::testing::matmul_cases
