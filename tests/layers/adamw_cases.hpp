// AdamW cases, generic over the handler: three chained steps against torch.optim.AdamW's
// formula written as a host loop.
#pragma once

#include "layers/layer_support.hpp"

namespace gpt2::testing::adamw_cases {

struct State {
  std::vector<Scalar> p, m, v;
};

// torch.optim.AdamW (single-tensor path): decay, lerp first moment, addcmul second moment,
// bias corrections, addcdiv.
inline void referenceStep(State& s, const std::vector<Scalar>& g, Index t, const AdamWSettings& a, bool decay) {
  const Scalar bc1 = 1.0 - std::pow(a.beta1, static_cast<Scalar>(t));
  const Scalar bc2 = 1.0 - std::pow(a.beta2, static_cast<Scalar>(t));
  for (std::size_t i = 0; i < s.p.size(); ++i) {
    if (decay) s.p[i] *= 1.0 - a.lr * a.weightDecay;
    s.m[i] = s.m[i] + (1.0 - a.beta1) * (g[i] - s.m[i]);
    s.v[i] = s.v[i] * a.beta2 + (1.0 - a.beta2) * g[i] * g[i];
    const Scalar denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + a.eps;
    s.p[i] = s.p[i] + (-(a.lr / bc1)) * s.m[i] / denom;
  }
}

template <class H>
void threeStepsMatchTorchFormula(H& h) {
  const AdamWSettings a{1e-2, 0.9, 0.95, 1e-8, 0.1};
  for (bool decay : {true, false}) {
    const std::size_t n = 37;
    State want{randomValues(n, 231), std::vector<Scalar>(n, 0.0), std::vector<Scalar>(n, 0.0)};
    auto p = lift(h, want.p), m = lift(h, want.m), v = lift(h, want.v);
    for (Index t = 1; t <= 3; ++t) {
      const auto g = randomValues(n, 240 + t);
      auto out = must(adamwUpdate(h, p, lift(h, g), m, v, t, a, decay));
      referenceStep(want, g, t, a, decay);
      p = out.param, m = out.m, v = out.v;
      expectClose(readAll(h, p), want.p, 1e-14, 0.0, decay ? "param (decayed)" : "param");
      expectClose(readAll(h, m), want.m, 1e-15, 0.0, "m");
      expectClose(readAll(h, v), want.v, 1e-15, 0.0, "v");
    }
  }
}

// The first step moves every parameter by about lr against the gradient's sign.
template <class H>
void firstStepMovesByLearningRate(H& h) {
  const std::vector<Scalar> p0 = {1.0, -2.0, 0.5}, g = {0.3, -4.0, 1e-3};
  auto out = must(adamwUpdate(h, lift(h, p0), lift(h, g), lift(h, std::vector<Scalar>(3, 0.0)),
                              lift(h, std::vector<Scalar>(3, 0.0)), 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, false));
  const auto p = readAll(h, out.param);
  EXPECT_NEAR(p[0], 1.0 - 1e-3, 1e-9);
  EXPECT_NEAR(p[1], -2.0 + 1e-3, 1e-9);
  EXPECT_NEAR(p[2], 0.5 - 1e-3, 1e-8);
}

// adamwUpdates over a list is adamwUpdate on each tensor, bit for bit, each with its own decay;
// lists of different lengths are refused.
template <class H>
void listIsEachTensorsUpdate(H& h) {
  const AdamWSettings a{1e-2, 0.9, 0.95, 1e-8, 0.1};
  std::vector<Buf<H>> ps, gs, ms, vs;
  const std::vector<bool> decay = {true, false, true};
  for (std::size_t k = 0; k < decay.size(); ++k) {
    const std::size_t n = 5 + 7 * k;
    ps.push_back(lift(h, randomValues(n, 260 + k)));
    gs.push_back(lift(h, randomValues(n, 270 + k)));
    ms.push_back(lift(h, randomValues(n, 280 + k)));
    auto v = randomValues(n, 290 + k);
    for (Scalar& x : v) x = x * x;  // second moments are >= 0
    vs.push_back(lift(h, v));
  }
  const auto all = must(adamwUpdates(h, ps, gs, ms, vs, 2, a, decay));
  ASSERT_EQ(all.size(), ps.size());
  for (std::size_t k = 0; k < ps.size(); ++k) {
    const auto one = must(adamwUpdate(h, ps[k], gs[k], ms[k], vs[k], 2, a, decay[k]));
    EXPECT_EQ(readAll(h, all[k].param), readAll(h, one.param)) << "tensor " << k;
    EXPECT_EQ(readAll(h, all[k].m), readAll(h, one.m)) << "tensor " << k;
    EXPECT_EQ(readAll(h, all[k].v), readAll(h, one.v)) << "tensor " << k;
  }
  expectError(adamwUpdates(h, ps, gs, ms, vs, 2, a, std::vector<bool>{true}),
              "adamw: 3 parameters but 3 gradients, 3 first and 3 second moments and 1 decay flags");
}

template <class H>
void rejectsBadStepAndShapes(H& h) {
  auto x = lift(h, randomValues(4, 251)), y = lift(h, randomValues(3, 252));
  expectError(adamwUpdate(h, x, x, x, x, 0, AdamWSettings{}, true), "step must be 1 or more");
  expectError(adamwUpdate(h, x, y, x, x, 1, AdamWSettings{}, true), "adamw: grad has 3 elements, expected 4");
}

}  // namespace gpt2::testing::adamw_cases
