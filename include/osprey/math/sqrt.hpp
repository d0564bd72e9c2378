// osprey::math::sqrt — the IEEE square root, the same on host and device.
//
// Unlike exp/log/tanh this needs no shared implementation: IEEE 754 requires sqrt to be correctly
// rounded, and both sides deliver that — the host's sqrtsd instruction (via __builtin_sqrt) and
// CUDA's double-precision sqrt, which is always IEEE round-to-nearest (-prec-sqrt only concerns
// float). A correctly rounded result is unique, so host and device agree bit for bit.
#pragma once

#include <cmath>

#include "osprey/config.hpp"
#include "osprey/kernel_types.hpp"

namespace osprey::math {

// √x; sqrt(-0) = -0, sqrt(x < 0) = NaN, sqrt(+inf) = +inf.
OSPREY_FN inline double sqrt(double x) {
#if OSPREY_DEVICE_PASS
  return ::sqrt(x);
#else
  return __builtin_sqrt(x);
#endif
}

// sqrt of a traced value: correctly rounded on the device, as here.
template <class A>
  requires TracedValue<A>
auto sqrt(A a) {
  return sqrtTraced(a);
}

}  // namespace osprey::math
