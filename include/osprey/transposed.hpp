// Which operand of a product is held transposed: the layout a device's matMulTransposed reads.
//
//   None  out (rows, cols) = a (rows, inner) · b (inner, cols), as matMul
//   A     out (rows, cols) = aᵀ · b, a held (inner, rows): output (r, c) sums a[k][r] · b[k][c]
//   B     out (rows, cols) = a · bᵀ, b held (cols, inner): output (r, c) sums a[r][k] · b[c][k]
//
// Each output is the same fma chain over k ascending from +0.0 as the product of the transposed
// copy (DESIGN.md §4): the layout moves no term and changes no order, so a device that reads the
// held layout as it is (the cuda device, through cuBLASLt's transposed operands) gives the bits of
// the copy-then-multiply reference without the copy.
#pragma once

namespace osprey {

enum class Transposed { None, A, B };

}  // namespace osprey
