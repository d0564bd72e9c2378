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

// tanh x over scalar type S (double, or a traced double: double_double.hpp).
template <class S>
OSPREY_FN S tanhOf(S x) {
  using namespace detail;
  const auto notNan = [&] {
    const S ax = fromBits(bitsOf(x) & ~kSignBit);
    const auto moderate = [&] {
      const DoubleDoubleOf<S> m = expm1Dd(2.0 * ax);
      const DoubleDoubleOf<S> den = twoSum(m.hi, 2.0);
      const S denLo = den.lo + m.lo;
      const S q = m.hi / den.hi;
      const DoubleDoubleOf<S> prod = twoProd(q, den.hi);
      const S rem = ((m.hi - prod.hi) - prod.lo) + (m.lo - q * denLo);
      const S t = q + rem / den.hi;
      return S(select(x > 0.0, t, -t));
    };
    // |x| < 2^-27: tanh x = x·(1 - x²/3 + ...) rounds to x (covers ±0 and subnormals exactly).
    // |x| > 22: 1 - tanh|x| < 2e^-44, far below half an ulp of 1.
    return when(
        ax < 0x1p-27, [&] { return x; },
        [&] { return when(ax > 22.0, [&] { return S(select(x > 0.0, 1.0, -1.0)); }, moderate); });
  };
  return when(x != x, [&] { return S(x + x); }, notNan);
}

// tanh x. tanh(±0) = ±0, tanh(±large) = ±1, NaN propagates.
OSPREY_FN inline double tanh(double x) { return tanhOf(x); }
// The same of a traced double: the same operations, recorded.
template <class S>
  requires TracedValue<S>
S tanh(S x) { return detail::withOwnLiterals(x, [](S v) { return tanhOf(v); }); }

}  // namespace osprey::math
