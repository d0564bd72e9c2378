// The exact contract's compiler flags are in force (DESIGN.md §4): no fused multiply-add but the
// products' own (each product term one fma, checked below on every host kernel), no
// -ffast-math family (reassociation, finite-only, no signed zeros, reciprocals), and doubles
// evaluated in double (FLT_EVAL_METHOD 0). Each check computes something whose IEEE answer
// differs from what the forbidden flag would produce, so adding -ffp-contract=fast or
// -ffast-math to the build makes these tests fail instead of silently changing the numbers.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include <gtest/gtest.h>

#include "handlers.hpp"

namespace osprey {
namespace {

// a*b + c where a*b = 1 - 2^-60 exactly: rounded it is 1.0, so unfused a*b + c = 0.0 while a
// fused multiply-add returns -2^-60.
constexpr double kA = 1.0 + 0x1p-30, kB = 1.0 - 0x1p-30, kC = -1.0;
constexpr double kFused = -0x1p-60;

// Operands come through volatiles so nothing is folded at compile time.
volatile double gA = kA, gB = kB, gC = kC;

// Compiled for targets that have FMA instructions: a compiler allowed to contract emits vfmadd here.
__attribute__((noinline, target("fma"))) double mulAddOnFmaTarget(double a, double b, double c) {
  return a * b + c;
}
__attribute__((noinline, target("avx512f"))) void mulAddLoopOnAvx512(const double* a, const double* b,
                                                                      const double* c, double* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = a[i] * b[i] + c[i];
}
__attribute__((noinline)) double mulAddDefaultTarget(double a, double b, double c) { return a * b + c; }

bool cpuHasFma() { return __builtin_cpu_supports("fma"); }
bool cpuHasAvx512() { return __builtin_cpu_supports("avx512f"); }

bool sameDoubleBits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; }

TEST(ExactContract, TheProbeDistinguishesFusedFromUnfused) {
  EXPECT_EQ(std::fma(kA, kB, kC), kFused) << "std::fma should round once";
  EXPECT_NE(kFused, 0.0);
}

TEST(ExactContract, MultiplyAddIsNotFusedOnTheDefaultTarget) {
  EXPECT_TRUE(sameDoubleBits(mulAddDefaultTarget(gA, gB, gC), 0.0));
}

TEST(ExactContract, MultiplyAddIsNotFusedOnAnFmaTarget) {
  if (!cpuHasFma()) GTEST_SKIP() << "this CPU has no FMA instructions";
  const double r = mulAddOnFmaTarget(gA, gB, gC);
  EXPECT_TRUE(sameDoubleBits(r, 0.0)) << "a*b + c gave " << r
                                << ": fused; is the build using -ffp-contract=fast or -ffast-math?";
}

TEST(ExactContract, VectorisedMultiplyAddIsNotFusedOnAvx512) {
  if (!cpuHasAvx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  constexpr int n = 64;
  std::vector<double> a(n, double{gA}), b(n, double{gB}), c(n, double{gC}), out(n, 1.0);
  mulAddLoopOnAvx512(a.data(), b.data(), c.data(), out.data(), n);
  for (int i = 0; i < n; ++i) ASSERT_TRUE(sameDoubleBits(out[i], 0.0)) << "element " << i << " = " << out[i];
}

// Products are chains of fused multiply-adds (DESIGN.md §4): out = fma(a, b, fma(-1, 1, +0.0)) is
// fma(a, b, -1) = -2^-60, where an unfused a*b + -1 would give 0. The host device's matMul is
// checked on every kernel this CPU can run (AVX-512, AVX2 + FMA, portable), and against lists.
// 8 x 2 x 32 covers two full 8 x 16 tiles in each direction; 8 x 2 x 2 takes the few-column path.
TEST(ExactContract, EveryProductTermIsOneFusedMultiplyAdd) {
  for (const Index cols : {Index{32}, Index{2}}) {
    constexpr Index rows = 8, inner = 2;
    std::vector<Scalar> a(rows * inner), b(inner * cols);
    for (Index i = 0; i < rows; ++i) {
      a[i * inner + 0] = -1.0;
      a[i * inner + 1] = gA;
    }
    for (Index j = 0; j < cols; ++j) {
      b[0 * cols + j] = 1.0;
      b[1 * cols + j] = gB;
    }
    std::vector<std::vector<Scalar>> results;
    Lists lists;
    results.push_back(testing::readAll(lists, *lists.matMul(*lists.fromList(a), *lists.fromList(b), rows, inner, cols)));
    for (auto isa : {HostMatMulIsa::Avx512, HostMatMulIsa::Avx2, HostMatMulIsa::Portable}) {
      if (!hostMatMulIsaAvailable(isa)) continue;
      std::vector<Scalar> out(rows * cols, 1.0);
      hostMatMulWith(isa, out.data(), a.data(), b.data(), rows, inner, cols);
      results.push_back(out);
    }
    for (const auto& result : results) {
      ASSERT_EQ(result.size(), static_cast<std::size_t>(rows * cols));
      for (std::size_t o = 0; o < result.size(); ++o)
        ASSERT_TRUE(sameDoubleBits(result[o], kFused)) << cols << " columns, output " << o << " = " << result[o]
                                                 << " (want fma(a, b, -1) = -2^-60)";
    }
  }
}

struct MatMulShape {
  Index rows, inner, cols;
};

// Operand values of wide range (exponents -20 .. 19), both signs, cancellation and signed zeros
// (one in eight is -0.0), from a fixed seed.
struct WideOperands {
  std::uint64_t state;
  double operator()() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state >> 11) * 0x1p-53 - 0.5;
    const int e = static_cast<int>((state >> 3) % 40) - 20;
    return (state & 7) == 0 ? -0.0 : std::ldexp(u, e);
  }
};

// Every host kernel's output for each product, memcmp against the lists handler's (the fma chain),
// on operands from one generator seeded with `seed`.
void expectEveryHostKernelIsLists(std::uint64_t seed, std::initializer_list<MatMulShape> shapes) {
  WideOperands next{seed};
  Lists lists;
  for (MatMulShape s : shapes) {
    std::vector<Scalar> a(static_cast<std::size_t>(s.rows * s.inner)), b(static_cast<std::size_t>(s.inner * s.cols));
    for (auto& v : a) v = next();
    for (auto& v : b) v = next();
    const auto want = testing::readAll(lists, *lists.matMul(*lists.fromList(a), *lists.fromList(b), s.rows, s.inner, s.cols));
    for (auto isa : {HostMatMulIsa::Avx512, HostMatMulIsa::Avx2, HostMatMulIsa::Portable}) {
      if (!hostMatMulIsaAvailable(isa)) continue;
      std::vector<Scalar> out(static_cast<std::size_t>(s.rows * s.cols), 1.0);
      hostMatMulWith(isa, out.data(), a.data(), b.data(), s.rows, s.inner, s.cols);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(Scalar)), 0)
          << "kernel " << static_cast<int>(isa) << ", " << s.rows << " x " << s.inner << " x " << s.cols;
    }
  }
}

// Every host kernel gives the lists handler's bits on shapes that cut tiles, strips and k blocks
// (MR = 8 rows, NR = 16 columns, KC = 256), with values of wide range, signed zeros and
// cancellation.
TEST(ExactContract, EveryHostMatMulKernelMatchesLists) {
  expectEveryHostKernelIsLists(12345, {MatMulShape{1, 1, 3}, MatMulShape{7, 13, 17}, MatMulShape{9, 300, 33},
                                       MatMulShape{17, 5, 2}, MatMulShape{3, 257, 1}, MatMulShape{33, 0, 20},
                                       MatMulShape{16, 513, 48}});
}

// The same on GPT-2's real widths (768, 2304, 3072 and the lm head's 50257 columns, one-row and
// one-column products): the edges above at the sizes the model runs. The sanitizer run leaves it
// out (the Makefile says why); `make test` runs it.
TEST(ExactContract, EveryHostMatMulKernelMatchesListsOnGpt2Widths) {
  expectEveryHostKernelIsLists(54321, {MatMulShape{5, 768, 2304}, MatMulShape{3, 768, 3072}, MatMulShape{4, 3072, 768},
                                       MatMulShape{9, 768, 768}, MatMulShape{3, 768, 50257}, MatMulShape{1, 768, 50257},
                                       MatMulShape{2304, 768, 1}, MatMulShape{50257, 768, 1}, MatMulShape{768, 3072, 2}});
}

// An operand held transposed (osprey/transposed.hpp) gives, on every host kernel, the bits of the
// product of its transposed copy: on tile, strip and k-block edges, on GPT-2's widths, and on the
// one- and two-column products that take the narrow path.
TEST(ExactContract, EveryHostMatMulKernelReadsHeldTransposedOperands) {
  WideOperands next{777};
  const auto transposed = [](const std::vector<Scalar>& m, Index r, Index c) {
    std::vector<Scalar> t(m.size());
    for (Index i = 0; i < r; ++i)
      for (Index j = 0; j < c; ++j) t[static_cast<std::size_t>(j * r + i)] = m[static_cast<std::size_t>(i * c + j)];
    return t;
  };
  Lists lists;
  for (MatMulShape s : {MatMulShape{1, 1, 3}, MatMulShape{7, 13, 17}, MatMulShape{9, 300, 33}, MatMulShape{17, 5, 2},
                        MatMulShape{3, 257, 1}, MatMulShape{33, 0, 20}, MatMulShape{16, 513, 48},
                        MatMulShape{64, 768, 2304}, MatMulShape{768, 64, 3072}, MatMulShape{1, 64, 768},
                        MatMulShape{2304, 768, 1}, MatMulShape{768, 300, 2}}) {
    std::vector<Scalar> a(static_cast<std::size_t>(s.rows * s.inner)), b(static_cast<std::size_t>(s.inner * s.cols));
    for (auto& v : a) v = next();
    for (auto& v : b) v = next();
    const auto want = testing::readAll(lists, *lists.matMul(*lists.fromList(a), *lists.fromList(b), s.rows, s.inner, s.cols));
    const auto aHeld = transposed(a, s.rows, s.inner), bHeld = transposed(b, s.inner, s.cols);
    for (auto isa : {HostMatMulIsa::Avx512, HostMatMulIsa::Avx2, HostMatMulIsa::Portable}) {
      if (!hostMatMulIsaAvailable(isa)) continue;
      for (auto layout : {Transposed::A, Transposed::B}) {
        std::vector<Scalar> out(static_cast<std::size_t>(s.rows * s.cols), 1.0);
        hostMatMulWith(isa, out.data(), layout == Transposed::A ? aHeld.data() : a.data(),
                       layout == Transposed::B ? bHeld.data() : b.data(), s.rows, s.inner, s.cols, layout);
        ASSERT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(Scalar)), 0)
            << "kernel " << static_cast<int>(isa) << ", " << (layout == Transposed::A ? "a" : "b") << " held, "
            << s.rows << " x " << s.inner << " x " << s.cols;
      }
    }
  }
}

TEST(ExactContract, NoReassociation) {
  volatile double big = 0x1p53, one = 1.0;
  const double x = big, y = one;
  // 2^53 + 1 rounds (ties to even) to 2^53, so the IEEE answer is 0; reassociated it is 1.
  EXPECT_EQ((x + y) - x, 0.0) << "additions were reassociated (-fassociative-math / -ffast-math)";
}

TEST(ExactContract, NaNAndInfinityAreHonoured) {
  volatile double zero = 0.0;
  const double nan = zero / zero, inf = 1.0 / zero;
  EXPECT_TRUE(std::isnan(nan)) << "-ffinite-math-only folds isnan to false";
  EXPECT_TRUE(nan != nan);
  EXPECT_TRUE(std::isinf(inf));
}

TEST(ExactContract, SignedZerosAreHonoured) {
  volatile double negZero = -0.0;
  const double z = negZero;
  EXPECT_FALSE(std::signbit(z + 0.0)) << "-0.0 + 0.0 is +0.0 in IEEE; -fno-signed-zeros folds it to -0.0";
}

TEST(ExactContract, DivisionIsNotAReciprocalMultiply) {
  volatile double three = 3.0, five = 5.0;
  const double x = three, y = five;
  // 3/5 correctly rounded differs from 3 * round(1/5): -freciprocal-math would give the latter.
  EXPECT_NE(3.0 / 5.0, 3.0 * (1.0 / 5.0));
  EXPECT_EQ(x / y, 3.0 / 5.0);
}

TEST(ExactContract, DoublesAreEvaluatedInDouble) {
  static_assert(FLT_EVAL_METHOD == 0, "intermediate results must be rounded to their own type");
#if defined(__FAST_MATH__)
  FAIL() << "compiled with -ffast-math";
#endif
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
  FAIL() << "compiled with -ffinite-math-only";
#endif
  // x87-style extended intermediates would keep 1 + 2^-60 exact; double rounds it to 1.
  volatile double one = 1.0, tiny = 0x1p-60;
  const double sum = one + tiny;
  EXPECT_EQ(sum - one, 0.0);
}

}  // namespace
}  // namespace osprey
