// GELU in GPT-2's tanh form, and its backward.
//
//   u = sqrt(2/pi) * (x + 0.044715 * x^3)
//   gelu(x)  = 0.5 * x * (1 + tanh(u))
//   gelu'(x) = 0.5 * (1 + tanh(u)) + 0.5 * x * (1 - tanh(u)^2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x^2)
//
// One shared OSPREY_FN definition of u (geluInner) serves both directions, so the forward and
// backward see the same tanh argument bit for bit.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "gpt2/layers/common.hpp"

namespace osprey {
class HostDevice;  // osprey/gpu/host/device.hpp: named here, never needed whole
}  // namespace osprey

namespace gpt2 {

inline constexpr osprey::Scalar kGeluScale = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr osprey::Scalar kGeluCubic = 0.044715;

// The tanh argument u(x) above; x^3 is (x * x) * x.
// (S: a double, or a traced one in a traced kernel.)
template <class S = osprey::Scalar>
OSPREY_INLINE S geluInner(S x) {
  const S cube = (x * x) * x;
  return kGeluScale * (x + kGeluCubic * cube);
}

// gelu(v) itself: (0.5 * v) * (1 + tanh(u(v))).
template <class S = osprey::Scalar>
OSPREY_INLINE S geluValue(S v) {
  return (0.5 * v) * (1.0 + osprey::math::tanh(geluInner(v)));
}

// dout * gelu'(v): the backward's element.
template <class S = osprey::Scalar>
OSPREY_INLINE S geluSlope(S dout, S v) {
  const S th = osprey::math::tanh(geluInner(v));
  const S sech2 = 1.0 - th * th;
  const S du = kGeluScale * (1.0 + (3.0 * kGeluCubic) * (v * v));
  const S local = 0.5 * (1.0 + th) + ((0.5 * v) * sech2) * du;
  return dout * local;
}

// gpu/host (the gpu handler on the host device, storing doubles) evaluates GELU four elements at
// a time over its vector lanes: the same doubles (gpt2/host/gelu_lanes.cpp defines these, for that
// handler alone, compiled by the host compiler; docs/EXACTNESS.md).
namespace host_lanes {
template <class H>
osprey::Result<Buf<H>> geluForward(H& h, const Buf<H>& x);
template <class H>
osprey::Result<Buf<H>> geluBackward(H& h, const Buf<H>& dout, const Buf<H>& x);

template <class H>
constexpr bool answers() {
  if constexpr (requires(H& h) { h.runtime()->name(); }) {
    using D = std::remove_cvref_t<decltype(*std::declval<H&>().runtime())>;
    return std::is_same_v<D, osprey::HostDevice> &&
           std::is_same_v<decltype(std::declval<const Buf<H>&>().data()), double*>;
  } else {
    return false;
  }
}
}  // namespace host_lanes

namespace reference {

// out = gelu(x), element-wise, any shape.
template <osprey::Tensor H>
osprey::Result<Buf<H>> geluForward(H& h, const Buf<H>& x) {
  if constexpr (host_lanes::answers<H>()) return host_lanes::geluForward(h, x);
  const auto xv = x.view();
  return h.build(h.length(x), [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> { return geluValue(xv[i]); });
}

// dx = dout * gelu'(x), element-wise; x is the forward's input.
template <osprey::Tensor H>
osprey::Result<Buf<H>> geluBackward(H& h, const Buf<H>& dout, const Buf<H>& x) {
  OSPREY_CHECK(checkLength(h, dout, h.length(x), "gelu backward", "dout"));
  if constexpr (host_lanes::answers<H>()) return host_lanes::geluBackward(h, dout, x);
  const auto xv = x.view(), dv = dout.view();
  return h.build(h.length(x), [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return geluSlope<KernelScalar<H>>(dv[i], xv[i]);
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
