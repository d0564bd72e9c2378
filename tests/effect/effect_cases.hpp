// The effect's conformance cases, written once and run for every handler (DESIGN.md §2, §7.5).
//
// Each case is a named free function template over the handler H that holds its own kernels:
// nvcc's extended `__host__ __device__` lambdas may not be defined inside a gtest body (a private
// member function) or a generic lambda, so the typed tests (effect_typed_tests.hpp) only call
// these. Expected values are computed here on the host by the plain loop the contract names,
// and compared bit for bit: the exact contract promises the same doubles, not close ones.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "osprey/effect.hpp"
#include "osprey/several.hpp"
#include "osprey/strict.hpp"

namespace osprey::testing::effect_cases {

// ---- element formulas shared by the kernels and the expectations --------------------------------

// Each formula is written once over the handler's kernel types (osprey/kernel_types.hpp): the
// kernels call it with KernelIndex / KernelScalar, the expectations with Index / Scalar.

// build's element i: exact in float64 for every i we use, yet distinct per element.
template <class I>
OSPREY_FN auto affineAt(I i) {
  return toScalar(i) * 0.5 - 3.0;
}

// A second sequence with a period (7) that never lines up with thread or tile widths.
template <class I>
OSPREY_FN auto periodicAt(I i) {
  return toScalar(i % 7) - 2.5;
}

// zipWith's combine: rounds (x / y is inexact), so a wrong pairing of elements shows.
template <class S>
OSPREY_FN S mixPair(S x, S y) {
  return x * y - x / y;
}

// reduce's combine: not associative (halving weights earlier elements less), so a fold in any
// order but element order gives different bits.
template <class S>
OSPREY_FN S halveAndAdd(S acc, S x) {
  return acc * 0.5 + x;
}

// ---- kernels (named, explicit return types: nvcc-compatible) ------------------------------------

template <class H>
Result<BufferOf<H>> buildAffine(H& h, Index n) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> { return affineAt(i); });
}

template <class H>
Result<BufferOf<H>> buildPeriodic(H& h, Index n) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> { return periodicAt(i); });
}

// Element i reads element n-1-i of another buffer: a kernel that captures a View.
template <class H>
Result<BufferOf<H>> buildReversedTwice(H& h, const BufferOf<H>& src) {
  const View v = src.view();
  const Index n = v.n;
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return v[Int(n) - Int(1) - asInt(i)] * 2.0 + toScalar(i);
  });
}

template <class H>
Result<BufferOf<H>> zipMix(H& h, const BufferOf<H>& a, const BufferOf<H>& b) {
  using S = KernelScalar<H>;
  return h.zipWith(a, b, [=] OSPREY_FN(S x, S y) -> S { return mixPair(x, y); });
}

template <class H>
Result<Scalar> reduceHalveAndAdd(H& h, const BufferOf<H>& b, Scalar seed) {
  using S = KernelScalar<H>;
  return h.reduce(b, seed, [=] OSPREY_FN(S acc, S x) -> S { return halveAndAdd(acc, x); });
}

// Values with a known first occurrence: element i holds i mod `period`.
template <class H>
Result<BufferOf<H>> buildModulo(H& h, Index n, Index period) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> { return toScalar(i % period); });
}

// -1 everywhere except `value` at positions `first` and `second`.
template <class H>
Result<BufferOf<H>> buildTwoHits(H& h, Index n, Index first, Index second, Scalar value) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return select(i == first || i == second, value, -1.0);
  });
}

// ---- host-side expectations ---------------------------------------------------------------------

inline std::vector<Scalar> hostAffine(Index n) {
  std::vector<Scalar> out(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) out[i] = affineAt(i);
  return out;
}

inline std::vector<Scalar> hostPeriodic(Index n) {
  std::vector<Scalar> out(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) out[i] = periodicAt(i);
  return out;
}

// The matMul contract as a plain float64 loop: out[i][j] = fma(a[i][k], b[k][j], acc) for k ascending
// from acc = +0.0, one rounding per term.
inline std::vector<Scalar> referenceMatMul(const std::vector<Scalar>& a, const std::vector<Scalar>& b,
                                           Index rows, Index inner, Index cols) {
  std::vector<Scalar> out(static_cast<std::size_t>(rows * cols));
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      Scalar acc = 0.0;
      for (Index k = 0; k < inner; ++k) acc = std::fma(a[i * inner + k], b[k * cols + j], acc);
      out[i * cols + j] = acc;
    }
  return out;
}

inline bool sameBitsScalar(Scalar a, Scalar b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Each case below asserts with gtest macros; the typed tests call them once per handler.

// ---- build / length / get -----------------------------------------------------------------------

template <class H>
void buildOnAwkwardSizes(H& h) {
  for (Index n : kAwkwardSizes) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    auto b = buildAffine(h, n);
    ASSERT_TRUE(b.ok()) << b.error().message;
    ASSERT_EQ(h.length(*b), n);
    const std::vector<Scalar> got = readAll(h, *b);
    const std::vector<Scalar> want = hostAffine(n);
    ASSERT_EQ(firstBitDifference(got, want), static_cast<std::size_t>(n)) << "first differing element";
  }
}

template <class H>
void buildKernelReadsAView(H& h) {
  for (Index n : kAwkwardSizes) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    auto src = buildPeriodic(h, n);
    ASSERT_TRUE(src.ok()) << src.error().message;
    auto b = buildReversedTwice(h, *src);
    ASSERT_TRUE(b.ok()) << b.error().message;
    const std::vector<Scalar> got = readAll(h, *b);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i)
      ASSERT_TRUE(sameBitsScalar(got[i], periodicAt(n - 1 - i) * 2.0 + static_cast<Scalar>(i)))
          << "element " << i << " = " << got[i];
  }
}

// Three values an element from one kernel, each depending on the one before (the second reads
// the first unrounded, as AdamW's parameter reads its new moments).
struct ThreeFromOne {
  View v;
  OSPREY_FN Several<3> operator()(Index i) const {
    const Scalar a = v[i] * 3.0 + 0.1;
    const Scalar b = a / 7.0 - v[i];
    return Several<3>{{a, b * b + a, -b}};
  }
};

// buildEach<3> equals three builds of the same expressions, bit for bit, on awkward sizes; a
// handler without buildEach (the reference definition then takes three builds) has nothing to
// compare.
template <class H>
void buildEachEqualsSeparateBuilds(H& h) {
  for (Index n : kAwkwardSizes) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    auto src = buildPeriodic(h, n);
    ASSERT_TRUE(src.ok()) << src.error().message;
    const ThreeFromOne several{src->view()};
    if constexpr (requires { h.template buildEach<3>(n, several); }) {
      auto together = h.template buildEach<3>(n, several);
      ASSERT_TRUE(together.ok()) << together.error().message;
      for (int j = 0; j < 3; ++j) {
        auto apart = h.build(n, [=] OSPREY_FN(Index i) -> Scalar { return several(i).v[j]; });
        ASSERT_TRUE(apart.ok()) << apart.error().message;
        const std::vector<Scalar> want = readAll(h, *apart), got = readAll(h, (*together)[j]);
        ASSERT_EQ(got.size(), want.size()) << "output " << j;
        ASSERT_TRUE(sameBits(got, want)) << "output " << j;  // n = 0: no data pointer to memcmp
      }
    } else {
      GTEST_SKIP() << h.device() << " has no buildEach";
    }
  }
}

template <class H>
void buildRejectsNegativeLength(H& h) {
  auto b = buildAffine(h, -1);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("negative length -1"), std::string::npos) << b.error().message;
}

template <class H>
void getReadsEachPosition(H& h) {
  const Index n = 1025;
  auto b = buildAffine(h, n);
  ASSERT_TRUE(b.ok()) << b.error().message;
  for (Index i : {Index{0}, Index{1}, Index{511}, Index{1023}, Index{1024}})
    EXPECT_TRUE(sameBitsScalar(h.get(*b, i), affineAt(i))) << "get(b, " << i << ")";
}

template <class H>
void getOutOfRangeFaults(H& h) {
  auto b = buildAffine(h, 5);
  ASSERT_TRUE(b.ok()) << b.error().message;
  // get returns a plain Scalar, so a bad position is a strict fault that `strictly` reports.
  auto past = strictly([&] { return h.get(*b, 5); });
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().message, "index out of range: 5 not below length 5");
  auto negative = strictly([&] { return h.get(*b, -1); });
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().message, "index out of range: -1 not below length 5");
}

// ---- zipWith ------------------------------------------------------------------------------------

template <class H>
void zipWithOnAwkwardSizes(H& h) {
  for (Index n : kAwkwardSizes) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    auto a = buildAffine(h, n);
    auto b = buildPeriodic(h, n);
    ASSERT_TRUE(a.ok() && b.ok());
    auto z = zipMix(h, *a, *b);
    ASSERT_TRUE(z.ok()) << z.error().message;
    ASSERT_EQ(h.length(*z), n);
    const std::vector<Scalar> got = readAll(h, *z);
    for (Index i = 0; i < n; ++i)
      ASSERT_TRUE(sameBitsScalar(got[i], mixPair(affineAt(i), periodicAt(i)))) << "element " << i;
  }
}

template <class H>
void zipWithRejectsLengthMismatch(H& h) {
  auto a = buildAffine(h, 3);
  auto b = buildAffine(h, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  auto z = zipMix(h, *a, *b);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.error().message, "zipWith: length mismatch: 3 vs 4");
}

// ---- reduce -------------------------------------------------------------------------------------

template <class H>
void reduceFoldsInElementOrder(H& h) {
  const Scalar seed = 0.1;
  for (Index n : kAwkwardSizes) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    auto b = buildPeriodic(h, n);
    ASSERT_TRUE(b.ok()) << b.error().message;
    auto r = reduceHalveAndAdd(h, *b, seed);
    ASSERT_TRUE(r.ok()) << r.error().message;
    Scalar forward = seed, backward = seed;
    for (Index i = 0; i < n; ++i) forward = halveAndAdd(forward, periodicAt(i));
    for (Index i = n - 1; i >= 0; --i) backward = halveAndAdd(backward, periodicAt(i));
    EXPECT_TRUE(sameBitsScalar(*r, forward)) << *r << " vs left fold " << forward;
    // The combine is order-sensitive on these values: a fold in another order could not pass.
    if (n >= 2) {
      EXPECT_NE(forward, backward);
    }
  }
}

template <class H>
void reduceOfEmptyIsSeed(H& h) {
  auto b = buildAffine(h, 0);
  ASSERT_TRUE(b.ok()) << b.error().message;
  for (Scalar seed : {42.25, -0.0, std::numeric_limits<Scalar>::infinity()}) {
    auto r = reduceHalveAndAdd(h, *b, seed);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(sameBitsScalar(*r, seed)) << "seed " << seed << " came back as " << *r;
  }
}

// ---- indexOf ------------------------------------------------------------------------------------

template <class H>
void indexOfFindsFirstHit(H& h) {
  for (Index n : {Index{7}, Index{1025}, Index{50257}}) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    auto b = buildModulo(h, n, 5);  // 0 1 2 3 4 0 1 ...: every value repeats
    ASSERT_TRUE(b.ok()) << b.error().message;
    for (Index v = 0; v < 5; ++v) {
      auto r = h.indexOf(*b, static_cast<Scalar>(v));
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(*r, v) << "first of the duplicates of " << v;
    }
    auto miss = h.indexOf(*b, 5.0);
    ASSERT_TRUE(miss.ok()) << miss.error().message;
    EXPECT_EQ(*miss, n) << "a miss answers length(b)";
  }
}

// Hits far apart, in different thread ranges and blocks: the smallest position wins.
template <class H>
void indexOfSmallestWinsAcrossRanges(H& h) {
  const Index n = 50257;
  const std::pair<Index, Index> hits[] = {{30005, 49000}, {0, n - 1}, {4095, 4096}, {n - 1, n - 1}, {12, 40000}};
  for (auto [first, second] : hits) {
    auto b = buildTwoHits(h, n, first, second, 3.5);
    ASSERT_TRUE(b.ok()) << b.error().message;
    auto r = h.indexOf(*b, 3.5);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r, first) << "hits at " << first << " and " << second;
  }
}

template <class H>
void indexOfOnEmpty(H& h) {
  auto b = buildAffine(h, 0);
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto r = h.indexOf(*b, 0.0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, 0);
}

// IEEE equality: NaN equals nothing (not even itself), and -0.0 == 0.0.
template <class H>
void indexOfUsesIeeeEquality(H& h) {
  const Scalar nan = std::numeric_limits<Scalar>::quiet_NaN();
  const std::vector<Scalar> values = {1.0, nan, 2.0, -0.0, 3.0, nan, 0.0};
  auto b = h.fromList(values);
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto findNan = h.indexOf(*b, nan);
  ASSERT_TRUE(findNan.ok());
  EXPECT_EQ(*findNan, 7) << "NaN never matches";
  auto findZero = h.indexOf(*b, 0.0);
  ASSERT_TRUE(findZero.ok());
  EXPECT_EQ(*findZero, 3) << "0.0 matches the -0.0 at 3";
  auto findNegZero = h.indexOf(*b, -0.0);
  ASSERT_TRUE(findNegZero.ok());
  EXPECT_EQ(*findNegZero, 3);
  auto findThree = h.indexOf(*b, 3.0);
  ASSERT_TRUE(findThree.ok());
  EXPECT_EQ(*findThree, 4);
}

// ---- matMul -------------------------------------------------------------------------------------

struct MatMulShape {
  Index rows, inner, cols;
};

// Empty, unit, primes, tile edges of the host device (4 rows x 16 columns x 256 deep), and a
// GPT-2-like thin product.
inline constexpr MatMulShape kMatMulShapes[] = {
    {0, 5, 0}, {0, 0, 0}, {0, 3, 4}, {4, 3, 0}, {1, 1, 1},     {7, 13, 5},   {33, 65, 17}, {64, 768, 3},
    {4, 256, 16}, {5, 257, 17}, {3, 300, 15}, {17, 513, 33}, {2, 1025, 1}, {16, 1, 64},  {1, 768, 50},
};

template <class H>
void matMulMatchesReferenceLoop(H& h) {
  std::uint64_t seed = 1;
  for (auto [rows, inner, cols] : kMatMulShapes) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << inner << "x" << cols);
    const auto a = randomValues(static_cast<std::size_t>(rows * inner), seed++);
    const auto b = randomValues(static_cast<std::size_t>(inner * cols), seed++);
    auto da = h.fromList(a);
    auto db = h.fromList(b);
    ASSERT_TRUE(da.ok() && db.ok());
    auto c = h.matMul(*da, *db, rows, inner, cols);
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_EQ(h.length(*c), rows * cols);
    const std::vector<Scalar> got = readAll(h, *c);
    const std::vector<Scalar> want = referenceMatMul(a, b, rows, inner, cols);
    const std::size_t at = firstBitDifference(got, want);
    ASSERT_EQ(at, want.size()) << "output " << at << ": " << got[at] << " vs reference " << want[at];
  }
}

// inner = 0: every output is the empty sum, +0.0.
template <class H>
void matMulWithEmptyInnerIsZeros(H& h) {
  auto a = h.fromList(std::vector<Scalar>{});
  auto b = h.fromList(std::vector<Scalar>{});
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = h.matMul(*a, *b, 3, 0, 5);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const std::vector<Scalar> got = readAll(h, *c);
  ASSERT_EQ(got.size(), 15u);
  for (Scalar x : got) EXPECT_TRUE(sameBitsScalar(x, 0.0)) << x;
}

template <class H>
void matMulRejectsShapeMismatch(H& h) {
  auto a = buildAffine(h, 6);
  auto b = buildAffine(h, 6);
  ASSERT_TRUE(a.ok() && b.ok());
  auto badB = h.matMul(*a, *b, 2, 3, 3);
  ASSERT_FALSE(badB.ok());
  EXPECT_EQ(badB.error().message, "matMul: b has 6 elements, expected inner*cols = 3*3 = 9");
  auto badA = h.matMul(*a, *b, 3, 3, 2);
  ASSERT_FALSE(badA.ok());
  EXPECT_EQ(badA.error().message, "matMul: a has 6 elements, expected rows*inner = 3*3 = 9");
  auto negative = h.matMul(*a, *b, -2, -3, 1);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("negative dimension"), std::string::npos) << negative.error().message;
}

// ---- fromList / load / device -------------------------------------------------------------------

template <class H>
void fromListRoundTripsEveryBitPattern(H& h) {
  std::vector<Scalar> values = {0.0, -0.0, 1.0, -1.5, 0x1.fffffffffffffp+1023, 0x1p-1074,
                                -0x1p-1022, std::numeric_limits<Scalar>::infinity(),
                                -std::numeric_limits<Scalar>::infinity(), std::numeric_limits<Scalar>::quiet_NaN()};
  const auto noise = randomValues(3000, 99, -1e6, 1e6);
  values.insert(values.end(), noise.begin(), noise.end());
  auto b = h.fromList(values);
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_EQ(h.length(*b), static_cast<Index>(values.size()));
  EXPECT_TRUE(sameBits(readAll(h, *b), values));
  EXPECT_TRUE(sameBitsScalar(h.get(*b, 1), -0.0));

  auto empty = h.fromList(std::vector<Scalar>{});
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_EQ(h.length(*empty), 0);
}

template <class H>
void loadOfMissingFileNamesTheFile(H& h) {
  const std::string path = "/nonexistent/osprey-test/missing-model.safetensors";
  auto b = h.load(path, "wte.weight");
  ASSERT_FALSE(b.ok()) << "loading a file that does not exist succeeded";
  EXPECT_NE(b.error().message.find(path), std::string::npos) << b.error().message;
}

template <class H>
void deviceNamesTheHandler(H& h) {
  const DeviceNaming want = expectedDeviceNaming<H>();
  const std::string got = h.device();
  if (want.exact) {
    EXPECT_EQ(got, want.name);
  } else {
    EXPECT_EQ(got.rfind(want.name, 0), 0u) << got << " does not start with " << want.name;
  }
}

}  // namespace osprey::testing::effect_cases
