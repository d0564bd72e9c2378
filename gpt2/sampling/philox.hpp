// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011; Random123's philox4x32_10): a counter-based generator. Its output is a pure function of
// a 128-bit counter and a 64-bit key, so the n-th draw is computed directly, without running the
// n - 1 before it: sampling keys it by the seed and counts by the token's position
// (gpt2/sampling/sampling.hpp), so a token's draw does not depend on what was generated before.
//
// Ten rounds of: two 32x32 -> 64-bit products of the counter's even words by fixed multipliers,
// their high halves xored with the odd words and the key, the words permuted; the key is bumped
// by the Weyl constants before every round but the first. Integer arithmetic only, hence the same
// bits on every machine and compiler. Checked against Random123's known answers
// (tests/gpt2/philox_test.cpp).
#pragma once

#include <array>
#include <cstdint>

namespace gpt2::sampling {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;

namespace detail {

inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;  // multipliers
inline constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;  // key bumps (golden ratio, sqrt(3) - 1)
inline constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;

constexpr PhiloxCounter philoxRound(const PhiloxCounter& x, const PhiloxKey& k) {
  const std::uint64_t p0 = std::uint64_t{kPhiloxM0} * x[0];
  const std::uint64_t p1 = std::uint64_t{kPhiloxM1} * x[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
  return {hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0};
}

}  // namespace detail

// The four output words for `counter` under `key`.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key = {key[0] + detail::kPhiloxW0, key[1] + detail::kPhiloxW1};
    counter = detail::philoxRound(counter, key);
  }
  return counter;
}

}  // namespace gpt2::sampling
