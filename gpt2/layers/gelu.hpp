// GELU in GPT-2's tanh form, and its backward.
//
//   u = sqrt(2/pi) * (x + 0.044715 * x^3)
//   gelu(x)  = 0.5 * x * (1 + tanh(u))
//   gelu'(x) = 0.5 * (1 + tanh(u)) + 0.5 * x * (1 - tanh(u)^2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x^2)
//
// One shared OSPREY_FN definition of u (geluInner) serves both directions, so the forward and
// backward see the same tanh argument bit for bit.
#pragma once

#include "gpt2/layers/common.hpp"

namespace gpt2 {

inline constexpr osprey::Scalar kGeluScale = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr osprey::Scalar kGeluCubic = 0.044715;

// The tanh argument u(x) above; x^3 is (x * x) * x.
OSPREY_INLINE osprey::Scalar geluInner(osprey::Scalar x) {
  const osprey::Scalar cube = (x * x) * x;
  return kGeluScale * (x + kGeluCubic * cube);
}

// gelu(v) itself: (0.5 * v) * (1 + tanh(u(v))).
OSPREY_INLINE osprey::Scalar geluValue(osprey::Scalar v) { return (0.5 * v) * (1.0 + osprey::math::tanh(geluInner(v))); }

namespace reference {

// out = gelu(x), element-wise, any shape.
template <osprey::Tensor H>
osprey::Result<Buf<H>> geluForward(H& h, const Buf<H>& x) {
  const auto xv = x.view();
  return h.build(h.length(x), [=] OSPREY_FN(osprey::Index i) -> osprey::Scalar { return geluValue(xv[i]); });
}

// dx = dout * gelu'(x), element-wise; x is the forward's input.
template <osprey::Tensor H>
osprey::Result<Buf<H>> geluBackward(H& h, const Buf<H>& dout, const Buf<H>& x) {
  OSPREY_CHECK(checkLength(h, dout, h.length(x), "gelu backward", "dout"));
  const auto xv = x.view(), dv = dout.view();
  return h.build(h.length(x), [=] OSPREY_FN(osprey::Index i) -> osprey::Scalar {
    const osprey::Scalar v = xv[i];
    const osprey::Scalar th = osprey::math::tanh(geluInner(v));
    const osprey::Scalar sech2 = 1.0 - th * th;
    const osprey::Scalar du = kGeluScale * (1.0 + (3.0 * kGeluCubic) * (v * v));
    const osprey::Scalar local = 0.5 * (1.0 + th) + ((0.5 * v) * sech2) * du;
    return dv[i] * local;
  });
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<Buf<H>> geluForward(H& h, const Buf<H>& x) {
  OSPREY_GPT2_DERIVED(geluForward, x)
  return reference::geluForward(h, x);
}

template <osprey::Tensor H>
osprey::Result<Buf<H>> geluBackward(H& h, const Buf<H>& dout, const Buf<H>& x) {
  OSPREY_GPT2_DERIVED(geluBackward, dout, x)
  return reference::geluBackward(h, dout, x);
}

}  // namespace gpt2
