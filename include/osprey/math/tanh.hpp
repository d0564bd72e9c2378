// osprey::math::tanh — hyperbolic tangent in plain double arithmetic, identical on host and device.
//
// Method: tanh|x| = m / (m + 2) with m = e^(2|x|) - 1 carried as a double-double (expm1Dd, so no
// cancellation for small |x|), the quotient formed with an exact-remainder correction and
// rounded once; the sign is restored at the end (tanh is odd, so tanh(-0) = -0). Measured
// <= 0.56 ulp.
#pragma once

#include "osprey/math/double_double.hpp"
#include "osprey/math/exp.hpp"

namespace osprey::math {

// tanh x. tanh(±0) = ±0, tanh(±large) = ±1, NaN propagates.
OSPREY_FN inline double tanh(double x) {
  using namespace detail;
  if (x != x) {
    return x + x;
  }
  const double ax = fromBits(bitsOf(x) & ~kSignBit);
  // |x| < 2^-27: tanh x = x·(1 - x²/3 + ...) rounds to x (covers ±0 and subnormals exactly).
  if (ax < 0x1p-27) {
    return x;
  }
  // |x| > 22: 1 - tanh|x| < 2e^-44, far below half an ulp of 1.
  if (ax > 22.0) {
    return x > 0.0 ? 1.0 : -1.0;
  }
  const DoubleDouble m = expm1Dd(2.0 * ax);
  const DoubleDouble den = twoSum(m.hi, 2.0);
  const double denLo = den.lo + m.lo;
  const double q = m.hi / den.hi;
  const DoubleDouble prod = twoProd(q, den.hi);
  const double rem = ((m.hi - prod.hi) - prod.lo) + (m.lo - q * denLo);
  const double t = q + rem / den.hi;
  return x > 0.0 ? t : -t;
}

}  // namespace osprey::math
