// Accuracy of the shared-source maths (include/osprey/math.hpp) against x87 long double.
//
// For each of exp, log and tanh: over a million fixed-seed random arguments spread over the ranges
// GPT-2's forward and backward passes use, the error of osprey::math::f(x) is measured in ulps of
// the true value (the long double overloads of std::exp/log/tanh, i.e. glibc's expl/logl/tanhl
// with a 64-bit significand, as the reference) and must stay below one ulp (in fact below 0.6);
// the worst case is printed. Special values (overflow, underflow, zeros, infinities, NaN) are
// checked exactly. sqrt must be correctly rounded and powi must follow its documented order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include "osprey/math.hpp"

namespace {

namespace om = osprey::math;

// Distance from `got` to the true value `want`, in units of the double spacing at |want| (for a
// subnormal `want` that spacing is 2^-1074). A correctly rounded result scores at most 0.5.
long double ulpError(double got, long double want) {
  long double a = std::fabs(want);
  int e = 0;
  std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): the double spacing there is 2^(e-53)
  const int spacingExp = std::max(e - 53, -1074);
  return std::fabs(static_cast<long double>(got) - want) / std::ldexp(1.0L, spacingExp);
}

// Fixed-seed uniform doubles: mt19937_64 is fully specified by the standard, and the mapping to
// [0, 1) is ours (std::uniform_real_distribution is not portable bit for bit).
class Sampler {
 public:
  explicit Sampler(std::uint64_t seed) : engine_(seed) {}
  double unit() { return static_cast<double>(engine_() >> 11) * 0x1p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  // exp of a uniform point of [ln lo, ln hi]: every decade equally often.
  double logUniform(double lo, double hi) { return std::exp(uniform(std::log(lo), std::log(hi))); }
  double sign() { return (engine_() & 1U) != 0 ? -1.0 : 1.0; }

 private:
  std::mt19937_64 engine_;
};

struct Worst {
  long double ulps = 0;
  double argument = 0;
  std::int64_t samples = 0;

  void record(double x, double got, long double want) {
    const long double err = ulpError(got, want);
    if (!(err <= ulps)) {  // also catches a NaN error, which then sticks and fails the assert
      ulps = err;
      argument = x;
    }
    ++samples;
  }
  void print(const char* name) const {
    std::printf("[ accuracy ] %s: %lld samples, max error %.4Lf ulp at x = %.17g (%a)\n", name,
                static_cast<long long>(samples), ulps, argument, argument);
  }
};

constexpr int kBulk = 500'000;  // per range: each function gets >= 10^6 arguments in all

// The contract is "within 1 ulp" (DESIGN.md §4). The methods round a double-double once, so they
// measure ~0.53 ulp; asserting 0.6 catches a regression long before the contract is at risk.
constexpr long double kMaxUlps = 0.6L;

TEST(MathAccuracy, ExpWithinOneUlpOverGpt2Range) {
  Sampler sample(0x6f737072'65790001ULL);
  Worst worst;
  auto check = [&](double x) {
    worst.record(x, om::exp(x), std::exp(static_cast<long double>(x)));
  };
  // The whole finite range (subnormal results included), softmax / loss's range, and near 0.
  for (int i = 0; i < kBulk; ++i) check(sample.uniform(-745.0, 709.0));
  for (int i = 0; i < kBulk; ++i) check(sample.uniform(-50.0, 50.0));
  for (int i = 0; i < kBulk / 5; ++i) check(sample.sign() * sample.logUniform(1e-20, 1.0));
  worst.print("exp");
  EXPECT_GE(worst.samples, 1'000'000);
  ASSERT_LT(worst.ulps, kMaxUlps) << "at x = " << worst.argument;
}

TEST(MathAccuracy, LogWithinOneUlpOverGpt2Range) {
  Sampler sample(0x6f737072'65790002ULL);
  Worst worst;
  auto check = [&](double x) {
    worst.record(x, om::log(x), std::log(static_cast<long double>(x)));
  };
  // Every decade, probabilities, around 1 (where e·ln2 and log m cancel), subnormal arguments.
  for (int i = 0; i < kBulk; ++i) check(sample.logUniform(1e-300, 1e300));
  for (int i = 0; i < kBulk; ++i) check(sample.logUniform(1e-300, 1.0));
  for (int i = 0; i < kBulk / 5; ++i) check(sample.uniform(0.5, 2.0));
  for (int i = 0; i < kBulk / 10; ++i) check(sample.logUniform(0x1p-1074, 0x1p-1022));
  worst.print("log");
  EXPECT_GE(worst.samples, 1'000'000);
  ASSERT_LT(worst.ulps, kMaxUlps) << "at x = " << worst.argument;
}

TEST(MathAccuracy, TanhWithinOneUlpOverGpt2Range) {
  Sampler sample(0x6f737072'65790003ULL);
  Worst worst;
  auto check = [&](double x) {
    worst.record(x, om::tanh(x), std::tanh(static_cast<long double>(x)));
  };
  // Up to where tanh rounds to ±1, GELU's working range, and near 0 (both signs).
  for (int i = 0; i < kBulk; ++i) check(sample.uniform(-20.0, 20.0));
  for (int i = 0; i < kBulk; ++i) check(sample.uniform(-5.0, 5.0));
  for (int i = 0; i < kBulk / 5; ++i) check(sample.sign() * sample.logUniform(1e-12, 1.0));
  worst.print("tanh");
  EXPECT_GE(worst.samples, 1'000'000);
  ASSERT_LT(worst.ulps, kMaxUlps) << "at x = " << worst.argument;
}

// ---- special values --------------------------------------------------------------------------

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kMinSubnormal = std::numeric_limits<double>::denorm_min();
constexpr double kMax = std::numeric_limits<double>::max();

TEST(MathSpecialValues, Exp) {
  EXPECT_EQ(om::exp(0.0), 1.0);
  EXPECT_EQ(om::exp(-0.0), 1.0);
  EXPECT_EQ(om::exp(1e-300), 1.0);
  EXPECT_EQ(om::exp(kInf), kInf);
  EXPECT_EQ(om::exp(-kInf), 0.0);
  EXPECT_TRUE(std::isnan(om::exp(kNan)));
  EXPECT_EQ(om::exp(710.0), kInf);
  EXPECT_EQ(om::exp(709.79), kInf);  // just past ln(DBL_MAX) = 709.7827...
  EXPECT_EQ(om::exp(1e308), kInf);
  EXPECT_TRUE(std::isfinite(om::exp(709.78)));
  EXPECT_EQ(om::exp(709.78), static_cast<double>(std::exp(static_cast<long double>(709.78))));
  EXPECT_EQ(om::exp(-746.0), 0.0);
  EXPECT_EQ(om::exp(-1e308), 0.0);
  EXPECT_FALSE(std::signbit(om::exp(-1e308)));
  EXPECT_EQ(om::exp(-745.0), kMinSubnormal);  // e^-745 = 4.94e-324 rounds to 2^-1074
  EXPECT_EQ(om::exp(-745.2), 0.0);            // below ln(2^-1075): rounds to 0
  EXPECT_EQ(om::exp(-740.0), static_cast<double>(std::exp(-740.0L)));  // deep subnormal
  EXPECT_EQ(om::exp(-708.5), static_cast<double>(std::exp(-708.5L)));  // just below 2^-1022
  EXPECT_EQ(om::exp(1.0), 2.718281828459045);
}

// Either side of the point where log's reduction switches from m to m/2.
const double kSqrt2Below = 1.4142135623730951;
const double kSqrt2Above = std::nextafter(1.4142135623730951, 2.0);

TEST(MathSpecialValues, Log) {
  EXPECT_EQ(om::log(0.0), -kInf);
  EXPECT_EQ(om::log(-0.0), -kInf);
  EXPECT_TRUE(std::isnan(om::log(-1.0)));
  EXPECT_TRUE(std::isnan(om::log(-kMinSubnormal)));
  EXPECT_TRUE(std::isnan(om::log(-kInf)));
  EXPECT_TRUE(std::isnan(om::log(kNan)));
  EXPECT_EQ(om::log(kInf), kInf);
  EXPECT_EQ(om::log(1.0), 0.0);
  EXPECT_FALSE(std::signbit(om::log(1.0)));
  EXPECT_EQ(om::log(2.0), 0.6931471805599453);
  EXPECT_EQ(om::log(kMinSubnormal),
            static_cast<double>(std::log(static_cast<long double>(kMinSubnormal))));
  EXPECT_EQ(om::log(kMax), static_cast<double>(std::log(static_cast<long double>(kMax))));
  for (double x : {std::nextafter(1.0, 2.0), std::nextafter(1.0, 0.0), kSqrt2Below, kSqrt2Above}) {
    EXPECT_EQ(om::log(x), static_cast<double>(std::log(static_cast<long double>(x)))) << x;
  }
}

TEST(MathSpecialValues, Tanh) {
  EXPECT_EQ(om::tanh(0.0), 0.0);
  EXPECT_FALSE(std::signbit(om::tanh(0.0)));
  EXPECT_EQ(om::tanh(-0.0), 0.0);
  EXPECT_TRUE(std::signbit(om::tanh(-0.0)));
  EXPECT_EQ(om::tanh(kMinSubnormal), kMinSubnormal);
  EXPECT_EQ(om::tanh(-kMinSubnormal), -kMinSubnormal);
  EXPECT_EQ(om::tanh(1e-200), 1e-200);
  EXPECT_EQ(om::tanh(kInf), 1.0);
  EXPECT_EQ(om::tanh(-kInf), -1.0);
  EXPECT_EQ(om::tanh(30.0), 1.0);
  EXPECT_EQ(om::tanh(-30.0), -1.0);
  EXPECT_EQ(om::tanh(20.0), 1.0);  // 1 - tanh(20) = 8.5e-18 < half an ulp of 1
  EXPECT_EQ(om::tanh(-1e300), -1.0);
  EXPECT_TRUE(std::isnan(om::tanh(kNan)));
  for (double x : {0x1p-27, std::nextafter(0x1p-27, 0.0), 0.5, 1.0, 22.0, 19.0}) {
    EXPECT_EQ(om::tanh(-x), -om::tanh(x)) << x;  // odd, exactly
    EXPECT_LT(ulpError(om::tanh(x), std::tanh(static_cast<long double>(x))), kMaxUlps) << x;
  }
}

TEST(MathSpecialValues, SqrtIsCorrectlyRounded) {
  EXPECT_EQ(om::sqrt(0.0), 0.0);
  EXPECT_TRUE(std::signbit(om::sqrt(-0.0)));
  EXPECT_TRUE(std::isnan(om::sqrt(-1.0)));
  EXPECT_TRUE(std::isnan(om::sqrt(kNan)));
  EXPECT_EQ(om::sqrt(kInf), kInf);
  EXPECT_EQ(om::sqrt(4.0), 2.0);
  EXPECT_EQ(om::sqrt(kMinSubnormal), 0x1p-537);
  Sampler sample(0x6f737072'65790004ULL);
  Worst worst;
  for (int i = 0; i < 100'000; ++i) {
    const double x = sample.logUniform(1e-300, 1e300);
    worst.record(x, om::sqrt(x), std::sqrt(static_cast<long double>(x)));
  }
  worst.print("sqrt");
  ASSERT_LE(worst.ulps, 0.5L) << "at x = " << worst.argument;
}

TEST(MathPowi, ExactCasesAndOrder) {
  EXPECT_EQ(om::powi(2.0, 0), 1.0);
  EXPECT_EQ(om::powi(kNan, 0), 1.0);
  EXPECT_EQ(om::powi(0.0, 0), 1.0);
  EXPECT_EQ(om::powi(2.0, 10), 1024.0);
  EXPECT_EQ(om::powi(-3.0, 3), -27.0);
  EXPECT_EQ(om::powi(2.0, -3), 0.125);
  EXPECT_EQ(om::powi(2.0, 1023), 0x1p1023);
  EXPECT_EQ(om::powi(2.0, 1024), kInf);
  EXPECT_EQ(om::powi(1.0, std::numeric_limits<std::int64_t>::min()), 1.0);
  EXPECT_EQ(om::powi(2.0, std::numeric_limits<std::int64_t>::min()), 0.0);
  EXPECT_EQ(om::powi(0.5, std::numeric_limits<std::int64_t>::max()), 0.0);
  // The documented order (low bit first, running squares) is the contract; x^13 = x·x⁴·x⁸.
  const double x = 0.9;
  const double x2 = x * x;
  const double x4 = x2 * x2;
  const double x8 = x4 * x4;
  EXPECT_EQ(om::powi(x, 13), ((1.0 * x) * x4) * x8);
}

TEST(MathPowi, AdamBiasCorrectionAccuracy) {
  // beta^t for AdamW's betas over a long run: relative error stays tiny (grows at most ~t/2 ulp).
  for (double beta : {0.9, 0.95, 0.99, 0.999}) {
    long double worstRel = 0;
    for (std::int64_t t = 1; t <= 20'000; ++t) {
      const long double want =
          std::pow(static_cast<long double>(beta), static_cast<long double>(t));
      if (want < 1e-300L) break;
      const long double rel = std::fabs(static_cast<long double>(om::powi(beta, t)) - want) / want;
      worstRel = std::max(worstRel, rel);
    }
    std::printf("[ accuracy ] powi(%g, t<=20000): max relative error %.3Lg\n", beta, worstRel);
    EXPECT_LT(worstRel, 1e-12L) << beta;
  }
}

}  // namespace

// The exact product's two forms, one fma (where the target has one) and Dekker's split, give the
// same pair bit for bit over the domain exp, log and tanh use (operands from 2^-70 to 4, both
// signs, and exact products), so the maths' bits do not depend on which form a target compiles.
TEST(MathDoubleDouble, TwoProdFormsAgreeBitForBit) {
  std::mt19937_64 rng(2718);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-70, 1);
  const auto bitsOf = [](double v) { return osprey::math::detail::bitsOf(v); };
  for (int i = 0; i < 2000000; ++i) {
    double a = std::ldexp(mantissa(rng), exponent(rng)), b = std::ldexp(mantissa(rng), exponent(rng));
    if (i % 3 == 0) a = -a;
    if (i % 7 == 0) b = std::ldexp(std::round(std::ldexp(b, 20)), -20);  // short mantissas: exact products
    if (i % 11 == 0) a = 0.0;
    const double p = a * b;
    const osprey::math::detail::DoubleDouble split = osprey::math::detail::twoProdSplit(a, b);
    const double fused = std::fma(a, b, -p);
    ASSERT_EQ(bitsOf(split.hi), bitsOf(p)) << a << " * " << b;
    ASSERT_EQ(bitsOf(split.lo), bitsOf(fused)) << a << " * " << b;
    const osprey::math::detail::DoubleDouble chosen = osprey::math::detail::twoProd(a, b);
    ASSERT_EQ(bitsOf(chosen.hi), bitsOf(split.hi));
    ASSERT_EQ(bitsOf(chosen.lo), bitsOf(split.lo));
  }
}
