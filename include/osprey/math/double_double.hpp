// Building blocks of the shared-source maths: bit access to doubles and error-free transforms.
//
// exp, log and tanh reach ~0.5 ulp by carrying their intermediate results as an unevaluated
// sum hi + lo of two doubles ("double-double") and rounding once at the end. The transforms here
// are exact only when every multiply and add is rounded on its own (never fused into an FMA):
// the build guarantees that (host -ffp-contract=off, nvcc -fmad=false, DESIGN.md §4), and on the
// device the products and sums of twoProd use the round-to-nearest intrinsics, which nvcc never
// contracts, so the transforms stay exact even in a unit built with other flags.
//
// Every function is written once over its scalar type: double, or a traced value
// (osprey/trace/values.hpp, kernel_types.hpp) when an opencl kernel calling exp, log or tanh is
// traced; then each operation below is recorded as the same operation, and each branch as a
// branch (when), so the device computes the same doubles.
#pragma once

#include <cstdint>
#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/kernel_types.hpp"
#include "osprey/math/fma.hpp"

namespace osprey::math::detail {

// The scalar type of an operation on a and b: the traced one if either is traced, else double.
template <class A, class B>
using Mixed = std::conditional_t<TracedValue<A>, A, std::conditional_t<TracedValue<B>, B, double>>;

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
template <class S>
  requires TracedValue<S>
auto bitsOf(S x) {
  return bitsOfTraced(x);
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
template <class U>
  requires TracedValue<U>
auto fromBits(U u) {
  return fromBitsTraced(u);
}

// f(x) for a traced double x with the numbers f records as literals of the program, not kernel
// arguments (graph.hpp): the traced overloads of exp, log and tanh, whose bodies are the doubles'.
template <class S, class F>
  requires TracedValue<S>
S withOwnLiterals(S x, F f) {
  [[maybe_unused]] const auto literals = literalScopeFor(x);
  return f(x);
}

// The double with bit pattern u, as scalar type S (a constant when S is traced).
template <class S>
OSPREY_FN S fromBitsAs(std::uint64_t u) {
  if constexpr (TracedValue<S>) {
    return S(fromBits(u));
  } else {
    return fromBits(u);
  }
}

// 2^e as a double, for e in [-1022, 1023] (a normal number: built directly from its exponent).
OSPREY_FN inline double pow2(int e) { return fromBits(static_cast<std::uint64_t>(e + 1023) << 52); }
template <class I>
  requires TracedValue<I>
auto pow2(I e) {
  return fromBits((e + 1023) << 52);
}

// An integral double (|k| < 2^31) as an int, or as a traced index.
template <class S>
OSPREY_FN auto toInt32(S k) {
  if constexpr (TracedValue<S>) {
    return toIndex(k);
  } else {
    return static_cast<int>(k);
  }
}

// A double's exponent field (11 bits of its pattern) as the exponent's integer type I.
template <class I, class U>
OSPREY_FN I exponentBits(U field) {
  if constexpr (TracedValue<U>) {
    return field;
  } else {
    return static_cast<I>(field);
  }
}

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
template <class S>
struct DoubleDoubleOf {
  S hi;
  S lo;
};
using DoubleDouble = DoubleDoubleOf<double>;

// a + b exactly, for any a, b (Knuth's TwoSum; 6 operations, no branch).
template <class A, class B>
OSPREY_FN DoubleDoubleOf<Mixed<A, B>> twoSum(A a, B b) {
  using S = Mixed<A, B>;
  const S s = a + b;
  const S bb = s - a;
  const S err = (a - (s - bb)) + (b - bb);
  return {s, err};
}

// a + b exactly, when |a| >= |b| or a == 0 (Dekker's FastTwoSum).
template <class A, class B>
OSPREY_FN DoubleDoubleOf<Mixed<A, B>> fastTwoSum(A a, B b) {
  using S = Mixed<A, B>;
  const S s = a + b;
  const S err = b - (s - a);
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
// a host compiled with FMA instructions; an OpenCL device, whose fma is correctly rounded) err is
// one fma(a, b, -p), elsewhere twoProdSplit. Both are exact, so both give the same pair (a nonzero
// error has one double; an exact product gives +0.0 either way) and the maths built on it the same
// bits on every target (tests/math/math_accuracy_test.cpp compares the two).
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
template <class A, class B>
  requires(TracedValue<A> || TracedValue<B>)
DoubleDoubleOf<Mixed<A, B>> twoProd(A a, B b) {
  using S = Mixed<A, B>;
  const S p = S(a) * b;
  return {p, fma(a, b, -p)};
}

}  // namespace osprey::math::detail
