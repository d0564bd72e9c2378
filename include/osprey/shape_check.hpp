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

// `batch` products of rows x inner by inner x cols stored one after another: a holds batch·rows·inner
// elements, b batch·inner·cols. Returns the result's length, batch·rows·cols.
inline Result<Index> checkBatchedMatMulShapes(Index lenA, Index lenB, Index batch, Index rows, Index inner,
                                              Index cols) {
  if (batch < 0 || rows < 0 || inner < 0 || cols < 0)
    return Error{fmt::format("batched matMul: negative dimension in batch={} rows={} inner={} cols={}", batch, rows,
                             inner, cols)};
  Index ra, rb, rc, ta, tb, tc;
  if (__builtin_mul_overflow(rows, inner, &ra) || __builtin_mul_overflow(inner, cols, &rb) ||
      __builtin_mul_overflow(rows, cols, &rc) || __builtin_mul_overflow(batch, ra, &ta) ||
      __builtin_mul_overflow(batch, rb, &tb) || __builtin_mul_overflow(batch, rc, &tc))
    return Error{fmt::format("batched matMul: integer overflow in shape {} x {}x{}x{}", batch, rows, inner, cols)};
  if (lenA != ta)
    return Error{fmt::format("batched matMul: a has {} elements, expected batch*rows*inner = {}*{}*{} = {}", lenA,
                             batch, rows, inner, ta)};
  if (lenB != tb)
    return Error{fmt::format("batched matMul: b has {} elements, expected batch*inner*cols = {}*{}*{} = {}", lenB,
                             batch, inner, cols, tb)};
  return tc;
}

}  // namespace osprey
