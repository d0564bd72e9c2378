// osprey::math::powi — x^n for an integer n (e.g. AdamW's bias corrections beta^t).
//
// Binary powering: walk n's bits from the lowest, multiplying the result by the running square
// x, x², x⁴, ... where a bit is set. The sequence of products depends only on n, so the result is
// the same on every handler; it takes about 2·log2(n) products instead of n - 1. Like repeated
// multiplication its worst-case relative error grows with n (about n/2 ulp), which for AdamW's
// beta^t (t up to ~10^5) stays far below what the optimiser can notice.
#pragma once

#include <cstdint>

#include "osprey/config.hpp"

namespace osprey::math {

// x^n; powi(x, 0) = 1 for every x (NaN included), negative n gives 1 / x^|n|.
OSPREY_FN inline double powi(double x, std::int64_t n) {
  // |n| as unsigned, so n = INT64_MIN does not overflow.
  std::uint64_t bits = n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
  double result = 1.0;
  double square = x;
  while (bits != 0) {
    if ((bits & 1U) != 0) {
      result = result * square;
    }
    bits >>= 1;
    if (bits != 0) {
      square = square * square;
    }
  }
  return n < 0 ? 1.0 / result : result;
}

}  // namespace osprey::math
