// osprey::math::fma — one fused multiply-add, a * b + c rounded once, the same on host and device.
//
// The exact contract's products are chains of these (DESIGN.md §4). Like sqrt it needs no shared
// implementation: IEEE 754 defines fma as correctly rounded, so the device's DFMA (__fma_rn), the
// CPU's vfmadd and a software std::fma (glibc, musl) return the same double. The build compiles the
// host with FMA instructions where the building CPU has them (CMakeLists.txt says which at
// configure time); elsewhere std::fma is the C library's correctly rounded software routine.
#pragma once

#include <cmath>

#include "osprey/config.hpp"
#include "osprey/kernel_types.hpp"

namespace osprey::math {

// a * b + c with one rounding.
OSPREY_FN inline double fma(double a, double b, double c) {
#if OSPREY_DEVICE_PASS
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// fma on traced values (osprey/trace/values.hpp): one fused multiply-add on the device.
template <class A, class B, class C>
  requires(TracedValue<A> || TracedValue<B> || TracedValue<C>)
auto fma(A a, B b, C c) {
  return fmaTraced(a, b, c);
}

}  // namespace osprey::math
