// DivideBy(d)(x) is x / d bit for bit, for power-of-two divisors (taken as a product) and others.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "osprey/math/divide.hpp"

namespace {

std::vector<double> hostileDividends() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, inf, -inf, std::nan(""),
                            std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min(),
                            std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
                            -std::numeric_limits<double>::max(), 3.0 * std::numeric_limits<double>::denorm_min()};
  std::mt19937_64 bits(20261202);
  for (int i = 0; i < 200000; ++i) {  // every exponent, sign and mantissa, subnormals included
    const std::uint64_t u = bits();
    double x;
    std::memcpy(&x, &u, sizeof x);
    xs.push_back(x);
  }
  return xs;
}

bool sameDoubleBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(DivideBy, EqualsTheDivisionBitForBit) {
  const std::vector<double> xs = hostileDividends();
  for (double d : {8.0, 0.125, 1.0, -4.0, 0x1p1000, 0x1p-1000, 0x1p1023, 0x1p-1074, 3.0, 7.9, -0.1, 0x1.8p-1060,
                   std::sqrt(48.0), std::sqrt(64.0)}) {
    const osprey::math::DivideBy by(d);
    for (double x : xs) {
      const double want = x / d, got = by(x);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << x << " / " << d;
        continue;
      }
      ASSERT_TRUE(sameDoubleBits(got, want)) << x << " / " << d << ": " << got << " against " << want;
    }
  }
}

// The product is taken only where it is exact: a power of two with a normal reciprocal.
TEST(DivideBy, MultipliesOnlyByExactReciprocals) {
  EXPECT_TRUE(osprey::math::DivideBy(8.0).multiplies());
  EXPECT_TRUE(osprey::math::DivideBy(-0x1p-1000).multiplies());
  EXPECT_FALSE(osprey::math::DivideBy(0x1p1023).multiplies());  // 2^-1023 is subnormal
  EXPECT_FALSE(osprey::math::DivideBy(0x1p-1074).multiplies());  // 2^1074 overflows
  EXPECT_FALSE(osprey::math::DivideBy(std::sqrt(48.0)).multiplies());
  EXPECT_FALSE(osprey::math::DivideBy(0.0).multiplies());
  EXPECT_FALSE(osprey::math::DivideBy(std::numeric_limits<double>::infinity()).multiplies());
}

}  // namespace
