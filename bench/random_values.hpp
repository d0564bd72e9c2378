// Deterministic benchmark inputs: splitmix64 mapped to [-1, 1), the same every run.
#pragma once

#include <cstdint>
#include <vector>

#include "osprey/config.hpp"

namespace osprey::bench {

inline std::vector<Scalar> randomValues(std::size_t n, std::uint64_t seed) {
  std::vector<Scalar> out(n);
  std::uint64_t state = seed;
  for (Scalar& x : out) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = 2.0 * (static_cast<Scalar>(z >> 11) * 0x1.0p-53) - 1.0;
  }
  return out;
}

}  // namespace osprey::bench
