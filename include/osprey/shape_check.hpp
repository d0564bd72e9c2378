// Shape preconditions shared by every handler, with errors that say what was expected.
#pragma once

#include <fmt/format.h>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace osprey {

inline Result<void> checkSameLength(const char* op, Index a, Index b) {
  if (a != b) return Error{fmt::format("{}: length mismatch: {} vs {}", op, a, b)};
  return {};
}

inline Result<void> checkMatMulShapes(Index lenA, Index lenB, Index rows, Index inner, Index cols) {
  if (rows < 0 || inner < 0 || cols < 0)
    return Error{fmt::format("matMul: negative dimension in rows={} inner={} cols={}", rows, inner, cols)};
  Index ra, rb, rc;
  if (__builtin_mul_overflow(rows, inner, &ra) || __builtin_mul_overflow(inner, cols, &rb) ||
      __builtin_mul_overflow(rows, cols, &rc))
    return Error{fmt::format("matMul: integer overflow in shape {}x{}x{}", rows, inner, cols)};
  if (lenA != ra)
    return Error{fmt::format("matMul: a has {} elements, expected rows*inner = {}*{} = {}", lenA, rows, inner, ra)};
  if (lenB != rb)
    return Error{fmt::format("matMul: b has {} elements, expected inner*cols = {}*{} = {}", lenB, inner, cols, rb)};
  return {};
}

}  // namespace osprey
