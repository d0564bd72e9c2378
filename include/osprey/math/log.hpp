// osprey::math::log — natural logarithm in plain double arithmetic, identical on host and device.
//
// Method: x = 2^e · m with m in [√2/2, √2) (read from the bits; subnormals first scaled by 2^54),
// f = m - 1 (exact), log(1 + f) = 2·atanh(s) with s = f / (2 + f), |s| <= 0.1716, summed as
// 2s + 2s³(1/3 + s²/5 + ...). s and the result are carried as double-doubles and e·ln2 is added
// exactly, so the only sizeable error is the final rounding: measured <= 0.55 ulp.
#pragma once

#include "osprey/math/double_double.hpp"

namespace osprey::math {
namespace detail {

// ln2 = kLogLn2Hi + kLogLn2Lo to ~2^-95. kLogLn2Hi has 42 significant bits, so e·kLogLn2Hi is
// exact for every exponent a double can have (|e| <= 1075 < 2^11).
constexpr double kLogLn2Hi = 0x1.62e42fefa3800p-1;
constexpr double kLogLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kSqrt2 = 1.4142135623730951;

// 1/(2n+1) for n = 1..11: the atanh series. With s² <= 0.0295 the first omitted term is below
// 2^-65 relative to the result.
constexpr double kLogC1 = 0.3333333333333333;
constexpr double kLogC2 = 0.2;
constexpr double kLogC3 = 0.14285714285714285;
constexpr double kLogC4 = 0.1111111111111111;
constexpr double kLogC5 = 0.09090909090909091;
constexpr double kLogC6 = 0.07692307692307693;
constexpr double kLogC7 = 0.06666666666666667;
constexpr double kLogC8 = 0.058823529411764705;
constexpr double kLogC9 = 0.05263157894736842;
constexpr double kLogC10 = 0.047619047619047616;
constexpr double kLogC11 = 0.043478260869565216;

}  // namespace detail

// log x over scalar type S (double, or a traced double: double_double.hpp).
template <class S>
OSPREY_FN S logOf(S x) {
  using namespace detail;
  using I = std::conditional_t<TracedValue<S>, IntFor<S>, int>;  // the exponent
  const auto finite = [&] {
    // A subnormal is made normal (exact) and the scale remembered.
    const auto subnormal = x < 0x1p-1022;
    const S xn = select(subnormal, x * 0x1p54, x);
    const I e0 = select(subnormal, I(-54), I(0));
    const auto u = bitsOf(xn);
    const I e1 = e0 + (exponentBits<I>((u >> 52) & 0x7ff) - 1023);
    const S m1 = fromBits((u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);  // in [1, 2)
    const auto halve = m1 > kSqrt2;
    const S m = select(halve, m1 * 0.5, m1);
    const I e = select(halve, e1 + 1, e1);
    const S f = m - 1.0;  // exact (Sterbenz)
    // s = f / (2 + f) as a double-double: quotient, then the exact remainder's correction.
    const DoubleDoubleOf<S> den = twoSum(2.0, f);
    const S sHi = f / den.hi;
    const DoubleDoubleOf<S> prod = twoProd(sHi, den.hi);
    const S sLo = (((f - prod.hi) - prod.lo) - sHi * den.lo) / den.hi;
    const S s2 = sHi * sHi;
    const S poly =
        kLogC1 +
        s2 * (kLogC2 +
              s2 * (kLogC3 +
                    s2 * (kLogC4 +
                          s2 * (kLogC5 +
                                s2 * (kLogC6 +
                                      s2 * (kLogC7 +
                                            s2 * (kLogC8 + s2 * (kLogC9 + s2 * (kLogC10 +
                                                                                s2 * kLogC11)))))))));
    // log(1 + f) = 2·sHi + (2·sLo + 2·s³·poly); 2·sHi is exact.
    const S logMHi = 2.0 * sHi;
    const S logMLo = 2.0 * sLo + ((2.0 * sHi) * s2) * poly;
    const S ed = toScalar(e);
    const DoubleDoubleOf<S> lead = twoSum(ed * kLogLn2Hi, logMHi);
    return S(lead.hi + (lead.lo + (logMLo + ed * kLogLn2Lo)));
  };
  return when(
      x != x, [&] { return S(x + x); },
      [&] {
        return when(
            x < 0.0, [&] { return fromBitsAs<S>(kQuietNanBits); },
            [&] {
              return when(
                  x == 0.0, [&] { return fromBitsAs<S>(kMinusInfBits); },
                  [&] { return when(bitsOf(x) == kPlusInfBits, [&] { return x; }, finite); });
            });
      });
}

// ln x. log(±0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN propagates, log(1) = +0.
OSPREY_FN inline double log(double x) { return logOf(x); }
// The same of a traced double: the same operations, recorded.
template <class S>
  requires TracedValue<S>
S log(S x) { return detail::withOwnLiterals(x, [](S v) { return logOf(v); }); }

}  // namespace osprey::math
