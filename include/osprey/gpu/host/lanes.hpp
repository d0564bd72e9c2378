// Lanes: four doubles computed side by side on the host's vector unit, for kernels written once
// over their scalar type (the shared maths, GELU) that the host then evaluates four elements at a
// time instead of one.
//
// Each lane is the double computation itself: every + - * / is one IEEE operation per lane, fma
// one fused operation per lane, and nothing is contracted (-ffp-contract=off covers vector code
// too), so lane j of f(Lanes) is f(double) of element j bit for bit. What differs is branching: a
// branch cannot go two ways at once, so Lanes take the generic forms that traced values take
// (osprey/kernel_types.hpp): when() and select() evaluate both sides and choose lane by lane. The
// shared maths are written so that both sides are safe to evaluate (no side effects, no traps:
// a lane that takes the other side only computes a value that is then dropped), which is also what
// a traced kernel relies on. tests/math/lanes_test.cpp compares every function lane by lane with
// its double form on a million arguments and every special value.
//
// Integers ride along for the maths' bit manipulations (exponent fields, 2^k): LaneInts hold
// 64-bit patterns, computed modulo 2^64 (unsigned), compared as signed.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__FMA__)
#include <immintrin.h>
#endif

#if defined(__CUDACC__)
#error "osprey/gpu/host/lanes.hpp is host code for the host compiler (nvcc takes no vector types into __host__ __device__ code)"
#endif

namespace osprey::lanes {

// One 256-bit register: the host build's AVX width (-mfma). Eight lanes, two registers an
// operation, ran slower with GCC 12 (it kept them in memory).
inline constexpr int kLanes = 4;

using F64x = double __attribute__((vector_size(kLanes * sizeof(double))));
using U64x = std::uint64_t __attribute__((vector_size(kLanes * sizeof(double))));
using I64x = std::int64_t __attribute__((vector_size(kLanes * sizeof(double))));

// The same bits as another type of the same size.
template <class To, class From>
To bitCast(const From& x) {
  static_assert(sizeof(To) == sizeof(From));
  To r;
  std::memcpy(&r, &x, sizeof r);
  return r;
}

// A lane-wise condition: all ones (true) or all zeros per lane, as vector comparisons give.
struct LaneMask {
  using osprey_traced = void;  // takes the generic (both sides, then choose) forms
  I64x m;
  friend LaneMask operator&&(LaneMask a, LaneMask b) { return {a.m & b.m}; }
  friend LaneMask operator||(LaneMask a, LaneMask b) { return {a.m | b.m}; }
  friend LaneMask operator!(LaneMask a) { return {~a.m}; }
};

#define OSPREY_LANES_ARITHMETIC(T, F, E, OP)                  \
  friend T operator OP(T a, T b) { return {a.F OP b.F}; }     \
  friend T operator OP(T a, E b) { return {a.F OP b}; }       \
  friend T operator OP(E a, T b) { return {a OP b.F}; }
#define OSPREY_LANES_COMPARE(T, E, OP, AS)                                     \
  friend LaneMask operator OP(T a, T b) { return {AS(a) OP AS(b)}; }          \
  friend LaneMask operator OP(T a, E b) { return {AS(a) OP b}; }

struct Lanes {
  using osprey_traced = void;
  F64x v;

  Lanes() = default;
  Lanes(F64x x) : v(x) {}             // NOLINT: a vector is its lanes
  Lanes(double c) : v(F64x{} + c) {}  // NOLINT: a constant in every lane

  static Lanes load(const double* p) {
    F64x x;
    std::memcpy(&x, p, sizeof x);
    return {x};
  }
  void store(double* p) const { std::memcpy(p, &v, sizeof v); }
  double operator[](int j) const { return v[j]; }

  OSPREY_LANES_ARITHMETIC(Lanes, v, double, +)
  OSPREY_LANES_ARITHMETIC(Lanes, v, double, -)
  OSPREY_LANES_ARITHMETIC(Lanes, v, double, *)
  OSPREY_LANES_ARITHMETIC(Lanes, v, double, /)
  friend Lanes operator-(Lanes a) { return {-a.v}; }
#define OSPREY_LANES_VALUE(a) (a).v
  OSPREY_LANES_COMPARE(Lanes, double, <, OSPREY_LANES_VALUE)
  OSPREY_LANES_COMPARE(Lanes, double, >, OSPREY_LANES_VALUE)
  OSPREY_LANES_COMPARE(Lanes, double, <=, OSPREY_LANES_VALUE)
  OSPREY_LANES_COMPARE(Lanes, double, >=, OSPREY_LANES_VALUE)
  OSPREY_LANES_COMPARE(Lanes, double, ==, OSPREY_LANES_VALUE)
  OSPREY_LANES_COMPARE(Lanes, double, !=, OSPREY_LANES_VALUE)
};

// 64-bit integers, lane by lane: arithmetic modulo 2^64, comparisons signed (the maths' exponent
// arithmetic: small signed values; its bit patterns: unsigned).
struct LaneInts {
  using osprey_traced = void;
  U64x u;

  LaneInts() = default;
  LaneInts(U64x x) : u(x) {}                                                // NOLINT
  LaneInts(std::int64_t c) : u(U64x{} + static_cast<std::uint64_t>(c)) {}  // NOLINT: a constant
  LaneInts(int c) : LaneInts(std::int64_t{c}) {}                            // NOLINT
  LaneInts(std::uint64_t c) : u(U64x{} + c) {}                              // NOLINT

  OSPREY_LANES_ARITHMETIC(LaneInts, u, std::uint64_t, +)
  OSPREY_LANES_ARITHMETIC(LaneInts, u, std::uint64_t, -)
  OSPREY_LANES_ARITHMETIC(LaneInts, u, std::uint64_t, &)
  OSPREY_LANES_ARITHMETIC(LaneInts, u, std::uint64_t, |)
  friend LaneInts operator<<(LaneInts a, int s) { return {a.u << s}; }
  friend LaneInts operator>>(LaneInts a, int s) { return {a.u >> s}; }
  friend LaneInts operator+(LaneInts a, int b) { return a + LaneInts(b); }
  friend LaneInts operator-(LaneInts a, int b) { return a - LaneInts(b); }
  friend LaneInts operator+(LaneInts a, std::int64_t b) { return a + LaneInts(b); }
  friend LaneInts operator-(LaneInts a, std::int64_t b) { return a - LaneInts(b); }
#define OSPREY_LANES_SIGNED(a) bitCast<I64x>((a).u)
  OSPREY_LANES_COMPARE(LaneInts, std::int64_t, <, OSPREY_LANES_SIGNED)
  OSPREY_LANES_COMPARE(LaneInts, std::int64_t, >, OSPREY_LANES_SIGNED)
  OSPREY_LANES_COMPARE(LaneInts, std::int64_t, <=, OSPREY_LANES_SIGNED)
  OSPREY_LANES_COMPARE(LaneInts, std::int64_t, >=, OSPREY_LANES_SIGNED)
  OSPREY_LANES_COMPARE(LaneInts, std::int64_t, ==, OSPREY_LANES_SIGNED)
  OSPREY_LANES_COMPARE(LaneInts, std::int64_t, !=, OSPREY_LANES_SIGNED)
  friend LaneMask operator<(LaneInts a, int b) { return a < std::int64_t{b}; }
  friend LaneMask operator>(LaneInts a, int b) { return a > std::int64_t{b}; }
  friend LaneMask operator<=(LaneInts a, int b) { return a <= std::int64_t{b}; }
  friend LaneMask operator>=(LaneInts a, int b) { return a >= std::int64_t{b}; }
  friend LaneMask operator==(LaneInts a, int b) { return a == std::int64_t{b}; }
  friend LaneMask operator!=(LaneInts a, int b) { return a != std::int64_t{b}; }
  friend LaneMask operator==(LaneInts a, std::uint64_t b) { return a == static_cast<std::int64_t>(b); }
  friend LaneMask operator!=(LaneInts a, std::uint64_t b) { return a != static_cast<std::int64_t>(b); }
};
#undef OSPREY_LANES_SIGNED
#undef OSPREY_LANES_VALUE
#undef OSPREY_LANES_COMPARE
#undef OSPREY_LANES_ARITHMETIC

// The generic operations (found by argument-dependent lookup from osprey/kernel_types.hpp and the
// maths), lane by lane. A choice is a blend of bit patterns (every mask lane all ones or zeros).
inline LaneInts bitsOfTraced(Lanes x) { return {bitCast<U64x>(x.v)}; }
inline Lanes fromBitsTraced(LaneInts u) { return {bitCast<F64x>(u.u)}; }
inline LaneInts selectTraced(LaneMask c, LaneInts a, LaneInts b) {
  const U64x m = bitCast<U64x>(c.m);
  return {(m & a.u) | (~m & b.u)};
}
inline Lanes selectTraced(LaneMask c, Lanes a, Lanes b) {
  return fromBitsTraced(selectTraced(c, bitsOfTraced(a), bitsOfTraced(b)));
}
inline LaneMask selectTraced(LaneMask c, LaneMask a, LaneMask b) { return {(c.m & a.m) | (~c.m & b.m)}; }
template <class A, class B>
  requires(std::is_convertible_v<A, double> || std::is_convertible_v<B, double>)
Lanes selectTraced(LaneMask c, A a, B b) {
  return selectTraced(c, Lanes(a), Lanes(b));
}

// Both sides, then each lane's own: what a branch is when every lane may go its own way.
template <class Then, class Else>
auto whenTraced(LaneMask c, Then then, Else otherwise) {
  return selectTraced(c, then(), otherwise());
}

// fma(a, b, c) rounded once, lane by lane: the FMA instruction where the build has it, else the C
// library's correctly rounded fma; either is the scalar code's double.
inline Lanes fmaTraced(Lanes a, Lanes b, Lanes c) {
#if defined(__FMA__)
  return {bitCast<F64x>(_mm256_fmadd_pd(bitCast<__m256d>(a.v), bitCast<__m256d>(b.v), bitCast<__m256d>(c.v)))};
#else
  F64x r;
  for (int j = 0; j < kLanes; ++j) r[j] = __builtin_fma(a.v[j], b.v[j], c.v[j]);
  return {r};
#endif
}
template <class A, class B, class C>
Lanes fmaTraced(A a, B b, C c) {
  return fmaTraced(Lanes(a), Lanes(b), Lanes(c));
}

// An integral double in every lane that matters (|x| < 2^51) as its integer: x + 1.5 * 2^52 holds
// x in its low mantissa bits exactly, so no conversion instruction (AVX-512 only) is needed. A
// lane outside that range gets some integer, which the maths then drop (a when() side not taken).
inline LaneInts toIndexTraced(Lanes x) {
  constexpr double kShifter = 0x1.8p52;
  return bitsOfTraced(x + kShifter) - std::uint64_t{0x4338000000000000ULL};
}

// An integer in every lane as a double (log's exponent), as static_cast rounds it.
inline Lanes toScalarTraced(LaneInts i) {
  F64x r;
  for (int j = 0; j < kLanes; ++j) r[j] = static_cast<double>(static_cast<std::int64_t>(i.u[j]));
  return {r};
}

// The maths' literal scope (osprey/math/double_double.hpp): nothing to record for lanes.
struct NoLiteralScope {};
inline NoLiteralScope literalScopeFor(Lanes) { return {}; }

}  // namespace osprey::lanes

