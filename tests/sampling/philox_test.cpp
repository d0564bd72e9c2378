// Philox4x32-10 against Random123's published known answers (Random123 1.14, tests/kat_vectors,
// the three "philox4x32 10" lines: counter[4] key[2] -> output[4]), and the uniform double
// sampling makes of it.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gpt2/sampling/philox.hpp"
#include "gpt2/sampling/sampling.hpp"

namespace gpt2::sampling {
namespace {

struct KnownAnswer {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

constexpr KnownAnswer kKat[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, MatchesRandom123KnownAnswers) {
  for (const KnownAnswer& k : kKat) EXPECT_EQ(philox4x32_10(k.counter, k.key), k.expected);
}

// constexpr: the generator is integer arithmetic only, so the compiler can run it too.
static_assert(philox4x32_10(kKat[2].counter, kKat[2].key) == kKat[2].expected);

TEST(Philox, UniformIsTheFirstTwoWordsTopFiftyThreeBits) {
  // Counter {position, 0, 0, 0} and key {seed, 0} for small seeds and positions: the zero vector.
  const PhiloxCounter zero = philox4x32_10({0, 0, 0, 0}, {0, 0});
  const double expected = static_cast<double>(((std::uint64_t{zero[0]} << 32) | zero[1]) >> 11) * 0x1p-53;
  EXPECT_EQ(uniformAt(0, 0), expected);
  // The seed's high word is the key's second word; the position's high word the counter's second.
  const PhiloxCounter high = philox4x32_10({7, 5, 0, 0}, {3, 9});
  EXPECT_EQ(uniformAt((std::uint64_t{9} << 32) | 3, (std::uint64_t{5} << 32) | 7),
            static_cast<double>(((std::uint64_t{high[0]} << 32) | high[1]) >> 11) * 0x1p-53);
}

TEST(Philox, UniformsLieInTheUnitIntervalAndDifferByPositionAndSeed) {
  std::set<double> seen;
  double sum = 0.0;
  for (std::uint64_t t = 0; t < 10000; ++t) {
    const double u = uniformAt(1337, t);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    seen.insert(u);
    sum += u;
  }
  EXPECT_EQ(seen.size(), 10000u);            // no repeats among 10000 draws of 53 bits
  EXPECT_NEAR(sum / 10000.0, 0.5, 0.01);     // mean of U[0, 1): 0.5, sd of the mean 0.003
  EXPECT_NE(uniformAt(1337, 5), uniformAt(1338, 5));
  EXPECT_NE(uniformAt(1337, 5), uniformAt(1337, 6));
  EXPECT_EQ(uniformAt(1337, 5), uniformAt(1337, 5));
}

}  // namespace
}  // namespace gpt2::sampling
