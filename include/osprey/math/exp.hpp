// osprey::math::exp — e^x in plain double arithmetic, identical on host and device.
//
// Method: x = k·ln2 + r with |r| <= ln2/2 (Cody–Waite: ln2 in three pieces, so r comes out as a
// double-double accurate far beyond double precision), then e^r - 1 by its Taylor series with the
// leading terms r + r²/2 carried as a double-double, and e^x = 2^k · (1 + (e^r - 1)) rounded once
// (subnormal results included). Measured error <= 0.53 ulp (tests/math/math_accuracy_test.cpp).
// The same reduction feeds tanh through expm1Dd.
#pragma once

#include "osprey/math/double_double.hpp"

namespace osprey::math {
namespace detail {

// ln2 = kLn2Part1 + kLn2Part2 + kLn2Part3. Parts 1 and 2 have 42 significant bits, so k·part is
// exact for |k| < 2^11 (all k that exp can reach: |x| <= 746 gives |k| <= 1077).
constexpr double kLn2Part1 = 0x1.62e42fefa3800p-1;
constexpr double kLn2Part2 = 0x1.ef35793c76800p-45;
constexpr double kLn2Part3 = -0x1.9ff0342542fc3p-90;
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
// Adding then subtracting 1.5·2^52 rounds a double of magnitude < 2^51 to the nearest integer.
constexpr double kRoundShifter = 0x1.8p52;

// x = k·ln2 + r, with r = r.hi + r.lo exactly to ~2^-120 and |r| <= ln2/2 (barely more).
template <class S>
struct ReducedByLn2 {
  S k;
  DoubleDoubleOf<S> r;
};

template <class S>
OSPREY_FN ReducedByLn2<S> reduceByLn2(S x) {
  const S k = (x * kInvLn2 + kRoundShifter) - kRoundShifter;
  // x - k·part1 is exact: both are multiples of ulp(x) (or of 2^-42) and the difference is
  // below 1/2, so it fits in 53 bits. k·part2 is exact by construction of part2.
  const S a = x - k * kLn2Part1;
  const S b = k * kLn2Part2;
  const DoubleDoubleOf<S> ab = twoSum(a, -b);
  const S lo = ab.lo - k * kLn2Part3;
  return {k, fastTwoSum(ab.hi, lo)};
}

// 1/n! for n = 3..15: the Taylor tail of e^r - 1. With |r| <= 0.3466 the first omitted term is
// below 2^-68 relative to the result.
constexpr double kExpC3 = 0.16666666666666666;
constexpr double kExpC4 = 0.041666666666666664;
constexpr double kExpC5 = 0.008333333333333333;
constexpr double kExpC6 = 0.001388888888888889;
constexpr double kExpC7 = 0.0001984126984126984;
constexpr double kExpC8 = 2.48015873015873e-05;
constexpr double kExpC9 = 2.7557319223985893e-06;
constexpr double kExpC10 = 2.755731922398589e-07;
constexpr double kExpC11 = 2.505210838544172e-08;
constexpr double kExpC12 = 2.08767569878681e-09;
constexpr double kExpC13 = 1.6059043836821613e-10;
constexpr double kExpC14 = 1.1470745597729725e-11;
constexpr double kExpC15 = 7.647163731819816e-13;

// e^r - 1 as a double-double, for r = hi + lo with |hi| <= ~0.35 and |lo| <= ulp(hi)/2. Relative to
// e^r - 1 itself (what expm1Dd needs when k = 0) as long as hi² does not underflow (|hi| > 2^-500).
// r + r²/2 are carried exactly; the tail r³/3! + ... is below 1.2% of the result, so its
// rounding in plain double costs < 2^-59 relative.
template <class S>
OSPREY_FN DoubleDoubleOf<S> expm1Reduced(DoubleDoubleOf<S> r) {
  const S h = r.hi;
  const DoubleDoubleOf<S> sq = twoProd(h, h);
  const S halfSq = sq.hi * 0.5;
  const S halfSqErr = sq.lo * 0.5;
  const S poly =
      kExpC3 +
      h * (kExpC4 +
           h * (kExpC5 +
                h * (kExpC6 +
                     h * (kExpC7 +
                          h * (kExpC8 +
                               h * (kExpC9 +
                                    h * (kExpC10 +
                                         h * (kExpC11 +
                                              h * (kExpC12 +
                                                   h * (kExpC13 +
                                                        h * (kExpC14 + h * kExpC15)))))))))));
  const S tail = (sq.hi * h) * poly;
  // e^(h+lo) - 1 = (e^h - 1) + e^h·(e^lo - 1) ~= (e^h - 1) + lo·(1 + h + h²/2).
  const S loTerm = r.lo * ((1.0 + h) + halfSq);
  const DoubleDoubleOf<S> lead = twoSum(h, halfSq);
  const S small = lead.lo + (halfSqErr + (tail + loTerm));
  return fastTwoSum(lead.hi, small);
}

// e^x - 1 as a double-double for 2^-30 <= x <= 44 (what tanh needs): relative error ~2^-58.
template <class S>
OSPREY_FN DoubleDoubleOf<S> expm1Dd(S x) {
  const ReducedByLn2<S> red = reduceByLn2(x);
  const DoubleDoubleOf<S> p = expm1Reduced(red.r);
  // 2^k·(1 + p) - 1 = (2^k - 1) + 2^k·p.hi + 2^k·p.lo; 0 < k <= 64, so scaling by 2^k is exact.
  const auto scaled = [&] {
    const S scale = pow2(toInt32(red.k));
    const DoubleDoubleOf<S> base = twoSum(scale, -1.0);
    const DoubleDoubleOf<S> sum = twoSum(base.hi, scale * p.hi);
    const S small = (base.lo + sum.lo) + scale * p.lo;
    return fastTwoSum(sum.hi, small);
  };
  if constexpr (TracedValue<S>) {  // a traced branch yields one value: each half chosen on its own
    const auto k0 = red.k == 0.0;
    return {when(k0, [&] { return p.hi; }, [&] { return scaled().hi; }),
            when(k0, [&] { return p.lo; }, [&] { return scaled().lo; })};
  } else {
    if (red.k == 0.0) {
      return p;
    }
    return scaled();
  }
}

// 2^k·(hi + lo) for a result below 2^-1022, rounded once onto the subnormal grid (multiples of
// 2^-1074). Rounding hi + lo to 53 bits first and then to the grid would round twice (up to 0.75
// ulp). Instead the pair is scaled to 2^(k+1022)·(hi + lo) < 1 (exact) and added to 1.0, whose
// binade has exactly the grid's spacing 2^-52; the fraction left after removing the 1.0 is the
// correctly rounded subnormal scaled by 2^1022.
template <class S, class I>
OSPREY_FN S scaleToSubnormal(DoubleDoubleOf<S> v, I k) {
  const S scale = pow2(k + 1022);  // k in [-1077, -1022]
  const S hi = v.hi * scale;
  const S lo = v.lo * scale;
  const DoubleDoubleOf<S> biased = twoSum(1.0, hi);
  const S rounded = biased.hi + (biased.lo + lo);  // in [1, 2]
  return (rounded - 1.0) * 0x1p-1022;              // both steps exact
}

// Past these, e^x rounds to +inf or to +0 (ln(DBL_MAX) = 709.78..., ln(2^-1075) = -745.13...).
constexpr double kExpOverflowAbove = 710.0;
constexpr double kExpUnderflowBelow = -746.0;

}  // namespace detail

// e^x over scalar type S (double, or a traced double: double_double.hpp).
template <class S>
OSPREY_FN S expOf(S x) {
  using namespace detail;
  // e^x for x in range: |x| >= 2^-54, no overflow beyond what rounding gives.
  const auto inRange = [&] {
    const ReducedByLn2<S> red = reduceByLn2(x);
    const DoubleDoubleOf<S> p = expm1Reduced(red.r);
    // e^r = 1 + p as a normalised double-double, in [0.70, 1.42].
    const DoubleDoubleOf<S> sum = twoSum(1.0, p.hi);
    const DoubleDoubleOf<S> er = fastTwoSum(sum.hi, sum.lo + p.lo);
    const auto k = toInt32(red.k);
    return when(
        k > -1022 || (k == -1022 && er.hi >= 1.0),
        [&] {
          const S mantissa = er.hi + er.lo;  // rounded once; scaling by 2^k below is exact
          return when(
              k <= 1023, [&] { return S(mantissa * pow2(k)); },
              [&] { return S((mantissa * pow2(k - 2)) * 4.0); });  // k = 1024, 1025: overflows to +inf if due
        },
        [&] { return scaleToSubnormal(er, k); });
  };
  return when(
      x != x, [&] { return S(x + x); },  // NaN in, (quiet) NaN out
      [&] {
        return when(
            x > kExpOverflowAbove, [&] { return fromBitsAs<S>(kPlusInfBits); },
            [&] {
              return when(
                  x < kExpUnderflowBelow, [&] { return S(0.0); },
                  [&] {
                    // |x| < 2^-54: e^x rounds to 1 (and the series' r² would underflow for the tiniest x).
                    return when(x < 0x1p-54 && x > -0x1p-54, [&] { return S(1.0 + x); }, inRange);
                  });
            });
      });
}

// e^x. Overflow gives +inf, underflow gradual (subnormals) then +0, NaN propagates, exp(±0) = 1.
OSPREY_FN inline double exp(double x) { return expOf(x); }
// The same of a traced double: the same operations, recorded.
template <class S>
  requires TracedValue<S>
S exp(S x) { return detail::withOwnLiterals(x, [](S v) { return expOf(v); }); }

}  // namespace osprey::math
