// LayerNorm cases, generic over the handler.
#pragma once

#include "layers/layer_support.hpp"

namespace gpt2::testing::layernorm_cases {

struct Reference {
  std::vector<Scalar> out, mean, rstd;
};

inline Reference referenceForward(const std::vector<Scalar>& x, const std::vector<Scalar>& w,
                                  const std::vector<Scalar>& b, Index N, Index C) {
  Reference r{std::vector<Scalar>(x.size()), std::vector<Scalar>(N), std::vector<Scalar>(N)};
  for (Index n = 0; n < N; ++n) {
    Scalar m = 0;
    for (Index c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    Scalar v = 0;
    for (Index c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    const Scalar s = 1.0 / std::sqrt(v + 1e-5);
    r.mean[n] = m;
    r.rstd[n] = s;
    for (Index c = 0; c < C; ++c) r.out[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
  }
  return r;
}

template <class H>
void forwardMatchesLoop(H& h) {
  const Index N = 5, C = 7;
  const auto x = randomValues(N * C, 41, -3.0, 3.0), w = randomValues(C, 42), b = randomValues(C, 43);
  auto got = must(layernormForward(h, lift(h, x), lift(h, w), lift(h, b), N, C));
  const auto want = referenceForward(x, w, b, N, C);
  expectClose(readAll(h, got.out), want.out, kForwardRtol, kForwardAtol, "layernorm out");
  expectClose(readAll(h, got.mean), want.mean, kForwardRtol, kForwardAtol, "layernorm mean");
  expectClose(readAll(h, got.rstd), want.rstd, kForwardRtol, kForwardAtol, "layernorm rstd");
}

// A constant row has zero variance: every output is the bias, exactly.
template <class H>
void constantRowGivesBias(H& h) {
  const Index N = 2, C = 3;
  const std::vector<Scalar> x = {2, 2, 2, -1, -1, -1}, w = {3, 4, 5}, b = {0.5, -0.25, 7};
  auto got = must(layernormForward(h, lift(h, x), lift(h, w), lift(h, b), N, C));
  EXPECT_EQ(readAll(h, got.out), (std::vector<Scalar>{0.5, -0.25, 7, 0.5, -0.25, 7}));
}

template <class H>
void backwardMatchesFiniteDifferences(H& h) {
  const Index N = 3, C = 5;
  const auto x = randomValues(N * C, 51, -2.0, 2.0), w = randomValues(C, 52), b = randomValues(C, 53);
  const auto r = randomValues(N * C, 54);
  auto fwd = must(layernormForward(h, lift(h, x), lift(h, w), lift(h, b), N, C));
  auto g = must(layernormBackward(h, lift(h, r), lift(h, x), lift(h, w), fwd.mean, fwd.rstd, N, C));
  auto loss = [&](const std::vector<Scalar>& xx, const std::vector<Scalar>& ww, const std::vector<Scalar>& bb) {
    auto out = must(layernormForward(h, lift(h, xx), lift(h, ww), lift(h, bb), N, C));
    return weightedSum(readAll(h, out.out), r);
  };
  expectClose(readAll(h, g.dx), numericGradient(x, [&](const auto& v) { return loss(v, w, b); }),
              kGradRtol, kGradAtol, "layernorm dx");
  expectClose(readAll(h, g.dw), numericGradient(w, [&](const auto& v) { return loss(x, v, b); }),
              kGradRtol, kGradAtol, "layernorm dw");
  expectClose(readAll(h, g.db), numericGradient(b, [&](const auto& v) { return loss(x, w, v); }),
              kGradRtol, kGradAtol, "layernorm db");
}

template <class H>
void rejectsWrongShapes(H& h) {
  auto x = lift(h, randomValues(12, 61)), w = lift(h, randomValues(4, 62)), b = lift(h, randomValues(3, 63));
  expectError(layernormForward(h, x, w, b, 3, 4), "layernorm: bias has 3 elements, expected 4");
  expectError(layernormForward(h, x, w, w, 4, 4), "layernorm: x has 12 elements, expected 16");
}

}  // namespace gpt2::testing::layernorm_cases
