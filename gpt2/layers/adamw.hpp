// The AdamW update (decoupled weight decay), as torch.optim.AdamW computes it, element-wise:
//
//   p   = p * (1 - lr * wd)                              (only for tensors the caller decays)
//   m'  = m + (1 - beta1) * (g - m)                      (torch's lerp form of beta1*m + (1-beta1)*g)
//   v'  = (v * beta2) + ((1 - beta2) * g) * g
//   bc1 = 1 - beta1^t,  bc2 = 1 - beta2^t                (t = step, 1-based; powers by powi)
//   p'  = p + ((-lr / bc1) * m') / (sqrt(v') / sqrt(bc2) + eps)
//
// GPT-2 training decays the 2-D tensors (matrices, embeddings) and not the 1-D ones (biases,
// LayerNorm gains); the caller says which with `decay`.
//
// adamwUpdates is the same step for several tensors at once, each with its own decay: defined as
// adamwUpdate on each in turn, so that a handler may answer the whole list together (the fast
// handler: a few launches for a GPT-2 step's 148 tensors, where one a tensor left the device
// waiting on each small one's launch).
#pragma once

#include <vector>

#include "gpt2/layers/common.hpp"
#include "osprey/several.hpp"

namespace gpt2 {

struct AdamWSettings {
  osprey::Scalar lr = 3e-4;
  osprey::Scalar beta1 = 0.9;
  osprey::Scalar beta2 = 0.999;
  osprey::Scalar eps = 1e-8;
  osprey::Scalar weightDecay = 0.0;
};

template <class H>
struct AdamWOut {
  Buf<H> param;  // same shape as the parameter
  Buf<H> m;      // first moment
  Buf<H> v;      // second moment
};

// One element's new moments and parameter (shared by the three kernels below), over the kernel's
// scalar type S.
template <class S>
OSPREY_INLINE S adamwFirstMoment(S m, S g, osprey::Scalar beta1) {
  return m + (1.0 - beta1) * (g - m);
}
template <class S>
OSPREY_INLINE S adamwSecondMoment(S v, S g, osprey::Scalar beta2) {
  return v * beta2 + ((1.0 - beta2) * g) * g;
}
// The parameter after the step from its new moments m2 and v2; `decayed` is p * (1 - lr * wd)
// where the tensor decays, else p.
template <class S>
OSPREY_INLINE S adamwParameter(S decayed, S m2, S v2, osprey::Scalar stepSize, osprey::Scalar bc2Sqrt,
                               osprey::Scalar eps) {
  const S denom = osprey::math::sqrt(v2) / bc2Sqrt + eps;
  return decayed + (stepSize * m2) / denom;
}

namespace detail {
// grad and the moments have param's length, and the step is 1 or more (every adamw answer checks).
template <osprey::Tensor H>
osprey::Result<void> checkAdamW(H& h, const Buf<H>& param, const Buf<H>& grad, const Buf<H>& m, const Buf<H>& v,
                                osprey::Index t) {
  const char* L = "adamw";
  const osprey::Index n = h.length(param);
  OSPREY_CHECK(checkLength(h, grad, n, L, "grad"));
  OSPREY_CHECK(checkLength(h, m, n, L, "first moment"));
  OSPREY_CHECK(checkLength(h, v, n, L, "second moment"));
  if (t < 1) return osprey::Error{fmt::format("{}: step must be 1 or more, got {}", L, t)};
  return {};
}
}  // namespace detail

namespace reference {

// param, m, v (all the parameter's shape) after step t (1-based) with gradient grad.
template <osprey::Tensor H>
osprey::Result<AdamWOut<H>> adamwUpdate(H& h, const Buf<H>& param, const Buf<H>& grad,
                                        const Buf<H>& m, const Buf<H>& v, osprey::Index t,
                                        osprey::Scalar lr, osprey::Scalar beta1,
                                        osprey::Scalar beta2, osprey::Scalar eps,
                                        osprey::Scalar weightDecay, bool decay) {
  OSPREY_CHECK(detail::checkAdamW(h, param, grad, m, v, t));
  const osprey::Index n = h.length(param);
  const auto pv = param.view(), gv = grad.view(), mv = m.view(), vv = v.view();
  const osprey::Scalar keep = decay ? 1.0 - lr * weightDecay : 1.0;
  const osprey::Scalar bc1 = 1.0 - osprey::math::powi(beta1, t);
  const osprey::Scalar bc2 = 1.0 - osprey::math::powi(beta2, t);
  const osprey::Scalar stepSize = -(lr / bc1);
  const osprey::Scalar bc2Sqrt = osprey::math::sqrt(bc2);

  // One pass where the handler has buildEach (reading p, g, m and v once, where three builds read
  // seven streams and write three); the same three doubles per element either way.
  const auto together = [=] OSPREY_FN(osprey::Index i) -> osprey::Several<3> {
    const osprey::Scalar m2 = adamwFirstMoment<osprey::Scalar>(mv[i], gv[i], beta1);
    const osprey::Scalar v2 = adamwSecondMoment<osprey::Scalar>(vv[i], gv[i], beta2);
    return osprey::Several<3>{
        {adamwParameter<osprey::Scalar>(decay ? pv[i] * keep : pv[i], m2, v2, stepSize, bc2Sqrt, eps), m2, v2}};
  };
  if constexpr (requires { h.template buildEach<3>(n, together); }) {
    auto [p2, m2, v2] = OSPREY_TRY(h.template buildEach<3>(n, together));
    return AdamWOut<H>{std::move(p2), std::move(m2), std::move(v2)};
  } else {
    auto m2 = OSPREY_TRY(h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
      return adamwFirstMoment<KernelScalar<H>>(mv[i], gv[i], beta1);
    }));
    auto v2 = OSPREY_TRY(h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
      return adamwSecondMoment<KernelScalar<H>>(vv[i], gv[i], beta2);
    }));
    const auto m2v = m2.view(), v2v = v2.view();
    auto p2 = OSPREY_TRY(h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
      return adamwParameter<KernelScalar<H>>(decay ? pv[i] * keep : pv[i], m2v[i], v2v[i], stepSize, bc2Sqrt, eps);
    }));
    return AdamWOut<H>{std::move(p2), std::move(m2), std::move(v2)};
  }
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<AdamWOut<H>> adamwUpdate(H& h, const Buf<H>& param, const Buf<H>& grad,
                                        const Buf<H>& m, const Buf<H>& v, osprey::Index t,
                                        osprey::Scalar lr, osprey::Scalar beta1,
                                        osprey::Scalar beta2, osprey::Scalar eps,
                                        osprey::Scalar weightDecay, bool decay) {
  OSPREY_GPT2_DERIVED(adamwUpdate, param, grad, m, v, t, lr, beta1, beta2, eps, weightDecay, decay)
  return reference::adamwUpdate(h, param, grad, m, v, t, lr, beta1, beta2, eps, weightDecay, decay);
}

// The same with the settings in one record.
template <osprey::Tensor H>
osprey::Result<AdamWOut<H>> adamwUpdate(H& h, const Buf<H>& param, const Buf<H>& grad,
                                        const Buf<H>& m, const Buf<H>& v, osprey::Index t,
                                        const AdamWSettings& s, bool decay) {
  return adamwUpdate(h, param, grad, m, v, t, s.lr, s.beta1, s.beta2, s.eps, s.weightDecay, decay);
}

namespace detail {
// The four lists and the decay flags hold one entry a tensor.
template <class List>
osprey::Result<void> checkAdamWLists(const List& params, const List& grads, const List& ms, const List& vs,
                                     const std::vector<bool>& decay) {
  const std::size_t n = params.size();
  if (grads.size() != n || ms.size() != n || vs.size() != n || decay.size() != n)
    return osprey::Error{fmt::format("adamw: {} parameters but {} gradients, {} first and {} second moments and {} "
                                     "decay flags",
                                     n, grads.size(), ms.size(), vs.size(), decay.size())};
  return {};
}
}  // namespace detail

namespace reference {

// out[i] = adamwUpdate(params[i], grads[i], ms[i], vs[i], t, ..., decay[i]), in list order.
template <osprey::Tensor H>
osprey::Result<std::vector<AdamWOut<H>>> adamwUpdates(H& h, const std::vector<Buf<H>>& params,
                                                      const std::vector<Buf<H>>& grads, const std::vector<Buf<H>>& ms,
                                                      const std::vector<Buf<H>>& vs, osprey::Index t,
                                                      osprey::Scalar lr, osprey::Scalar beta1, osprey::Scalar beta2,
                                                      osprey::Scalar eps, osprey::Scalar weightDecay,
                                                      const std::vector<bool>& decay) {
  OSPREY_CHECK(detail::checkAdamWLists(params, grads, ms, vs, decay));
  std::vector<AdamWOut<H>> out;
  out.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i)
    out.push_back(OSPREY_TRY(gpt2::adamwUpdate(h, params[i], grads[i], ms[i], vs[i], t, lr, beta1, beta2, eps,
                                               weightDecay, static_cast<bool>(decay[i]))));
  return out;
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<std::vector<AdamWOut<H>>> adamwUpdates(H& h, const std::vector<Buf<H>>& params,
                                                      const std::vector<Buf<H>>& grads, const std::vector<Buf<H>>& ms,
                                                      const std::vector<Buf<H>>& vs, osprey::Index t,
                                                      osprey::Scalar lr, osprey::Scalar beta1, osprey::Scalar beta2,
                                                      osprey::Scalar eps, osprey::Scalar weightDecay,
                                                      const std::vector<bool>& decay) {
  OSPREY_GPT2_DERIVED(adamwUpdates, params, grads, ms, vs, t, lr, beta1, beta2, eps, weightDecay, decay)
  return reference::adamwUpdates(h, params, grads, ms, vs, t, lr, beta1, beta2, eps, weightDecay, decay);
}

template <osprey::Tensor H>
osprey::Result<std::vector<AdamWOut<H>>> adamwUpdates(H& h, const std::vector<Buf<H>>& params,
                                                      const std::vector<Buf<H>>& grads, const std::vector<Buf<H>>& ms,
                                                      const std::vector<Buf<H>>& vs, osprey::Index t,
                                                      const AdamWSettings& s, const std::vector<bool>& decay) {
  return adamwUpdates(h, params, grads, ms, vs, t, s.lr, s.beta1, s.beta2, s.eps, s.weightDecay, decay);
}

}  // namespace gpt2
