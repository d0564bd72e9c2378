// Building blocks of the shared-source maths: bit access to doubles and error-free transforms.
//
// exp, log and tanh reach ~0.5 ulp by carrying their intermediate results as an unevaluated
// sum hi + lo of two doubles ("double-double") and rounding once at the end. The transforms here
// are exact only when every multiply and add is rounded on its own (never fused into an FMA):
// the build guarantees that (host -ffp-contract=off, nvcc -fmad=false, DESIGN.md §4), and on the
// device the products and sums of twoProd use the round-to-nearest intrinsics, which nvcc never
// contracts, so the transforms stay exact even in a unit built with other flags.
#pragma once

#include <cstdint>

#include "osprey/config.hpp"

namespace osprey::math::detail {

// The bit pattern of a double and back. std::bit_cast is constexpr-host only under nvcc, so the
// device pass uses the CUDA reinterpretation intrinsics and the host a memcpy (folded to a move).
OSPREY_FN inline std::uint64_t bitsOf(double x) {
#if OSPREY_DEVICE_PASS
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
#endif
}

OSPREY_FN inline double fromBits(std::uint64_t u) {
#if OSPREY_DEVICE_PASS
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// 2^e as a double, for e in [-1022, 1023] (a normal number: built directly from its exponent).
OSPREY_FN inline double pow2(int e) { return fromBits(static_cast<std::uint64_t>(e + 1023) << 52); }

constexpr std::uint64_t kSignBit = 0x8000000000000000ULL;
constexpr std::uint64_t kPlusInfBits = 0x7ff0000000000000ULL;
constexpr std::uint64_t kMinusInfBits = 0xfff0000000000000ULL;
constexpr std::uint64_t kQuietNanBits = 0x7ff8000000000000ULL;

// Round-to-nearest products and sums that are never fused, whatever the unit's FMA flags.
OSPREY_FN inline double mulRn(double a, double b) {
#if OSPREY_DEVICE_PASS
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

OSPREY_FN inline double addRn(double a, double b) {
#if OSPREY_DEVICE_PASS
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

OSPREY_FN inline double subRn(double a, double b) {
#if OSPREY_DEVICE_PASS
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// An unevaluated sum hi + lo with |lo| <= ulp(hi) / 2 (after normalising).
struct DoubleDouble {
  double hi;
  double lo;
};

// a + b exactly, for any a, b (Knuth's TwoSum; 6 operations, no branch).
OSPREY_FN inline DoubleDouble twoSum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);
  return {s, err};
}

// a + b exactly, when |a| >= |b| or a == 0 (Dekker's FastTwoSum).
OSPREY_FN inline DoubleDouble fastTwoSum(double a, double b) {
  const double s = a + b;
  const double err = b - (s - a);
  return {s, err};
}

// a * b exactly without an FMA: p = a·b rounded and err = a·b - p by Dekker's product with
// Veltkamp's split (17 operations). Valid while the operands' halves cannot overflow and the error
// term does not underflow (|a|, |b| well inside [2^-500, 2^500]: every use is).
OSPREY_FN inline DoubleDouble twoProdSplit(double a, double b) {
  constexpr double kSplitter = 134217729.0;  // 2^27 + 1
  const double ta = mulRn(kSplitter, a);
  const double aHi = subRn(ta, subRn(ta, a));
  const double aLo = subRn(a, aHi);
  const double tb = mulRn(kSplitter, b);
  const double bHi = subRn(tb, subRn(tb, b));
  const double bLo = subRn(b, bHi);
  const double p = mulRn(a, b);
  const double err = addRn(
      addRn(addRn(subRn(mulRn(aHi, bHi), p), mulRn(aHi, bLo)), mulRn(aLo, bHi)), mulRn(aLo, bLo));
  return {p, err};
}

// a * b exactly, on the same domain. Where the target has a fused multiply-add (the device's DFMA;
// a host compiled with FMA instructions) err is one fma(a, b, -p), elsewhere twoProdSplit. Both
// are exact, so both give the same pair (a nonzero error has one double; an exact product gives
// +0.0 either way) and the maths built on it the same bits on every target
// (tests/math/math_accuracy_test.cpp compares the two).
OSPREY_FN inline DoubleDouble twoProd(double a, double b) {
#if OSPREY_DEVICE_PASS
  const double p = __dmul_rn(a, b);
  return {p, __fma_rn(a, b, -p)};
#elif defined(__FMA__)
  const double p = a * b;
  return {p, __builtin_fma(a, b, -p)};
#else
  return twoProdSplit(a, b);
#endif
}

}  // namespace osprey::math::detail
