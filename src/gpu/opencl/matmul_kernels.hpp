// The opencl device's product, OpenCL C written here rather than traced.
//
// out (rows, cols) = a (rows, inner) * b (inner, cols). Each output is the contract's chain:
// acc = +0.0, then acc = fma(a[r][k], b[k][c], acc) for k ascending, one rounding per step, never
// split or reordered. A work item keeps the chains of a strip of outputs, ry rows by 8 adjacent
// columns, as ry double8 accumulators: lane j of acc[i] is output (r0 + i, c0 + j)'s own chain, and
// an elementwise fma of double8s is eight independent fmas. So each b[k][c0..c0+7] loaded serves ry
// rows and each a[r][k] eight columns, and ry * 8 independent chains keep the fma units busy (a CPU
// through PoCL vectorises each double8 step; a GPU's threads hold them in registers).
//
// Nothing is padded: a chain runs exactly `inner` steps (a padded step fma(0, 0, acc) would turn
// an accumulated -0.0 into +0.0); a strip past the last column loads only the columns that exist
// and stores only those; rows past the last reuse the last row's address and are not stored.
// `inner` = 0 stores +0.0. No local memory and no barrier: any work-group size the device takes
// runs it (matmul_plan.hpp picks one). Measured on PoCL and on an H200 through NVIDIA's OpenCL
// (bench/RESULTS.md, 2026-12-05), this beat 16 x 16 local-memory tiles on both.
#pragma once

namespace osprey::opencl_detail {

// Kernel names: ry = 8 rows per work item, and ry = 1 for products of fewer than 8 rows (one-row
// products: a wider strip would only repeat the row's chains). A one-column product (a matrix
// times a vector: decoding's lm head) would use one lane of eight, so it has its own kernel, the
// same strips one column wide: 8 rows' chains per work item, one double each.
// In MatMulKernel's order (matmul_plan.hpp).
inline constexpr const char* kMatMulKernelNames[] = {"osprey_matmul_strips8", "osprey_matmul_strips1",
                                                     "osprey_matmul_column"};
// Columns per strip (the double8 lanes).
inline constexpr long kMatMulStripColumns = 8;

inline constexpr const char* kMatMulKernels = R"(
static void osprey_matmul_strip(__global double* out, const long oo, __global const double* a, const long ao,
                                __global const double* b, const long bo, const long rows, const long inner,
                                const long cols, const int ry) {
  const long c0 = (long)get_global_id(0) * 8, r0 = (long)get_global_id(1) * ry;
  if (c0 >= cols || r0 >= rows) return;
  __global const double* ar[8];
  double8 acc[8];
  for (int i = 0; i < ry; ++i) {
    ar[i] = a + ao + (r0 + i < rows ? r0 + i : rows - 1) * inner;
    acc[i] = (double8)(0.0);
  }
  __global const double* bk = b + bo + c0;
  if (c0 + 8 <= cols) {
    for (long k = 0; k < inner; ++k, bk += cols) {
      const double8 bv = vload8(0, bk);
      for (int i = 0; i < ry; ++i) acc[i] = fma((double8)(ar[i][k]), bv, acc[i]);
    }
  } else {
    const int w = (int)(cols - c0);
    for (long k = 0; k < inner; ++k, bk += cols) {
      double t[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
      for (int j = 0; j < w; ++j) t[j] = bk[j];
      const double8 bv = vload8(0, t);
      for (int i = 0; i < ry; ++i) acc[i] = fma((double8)(ar[i][k]), bv, acc[i]);
    }
  }
  for (int i = 0; i < ry && r0 + i < rows; ++i) {
    __global double* o = out + oo + (r0 + i) * cols + c0;
    if (c0 + 8 <= cols) {
      vstore8(acc[i], 0, o);
    } else {
      double t[8];
      vstore8(acc[i], 0, t);
      for (long j = 0; c0 + j < cols; ++j) o[j] = t[j];
    }
  }
}

__kernel void osprey_matmul_strips8(__global double* out, const long oo, __global const double* a, const long ao,
                                    __global const double* b, const long bo, const long rows, const long inner,
                                    const long cols) {
  osprey_matmul_strip(out, oo, a, ao, b, bo, rows, inner, cols, 8);
}

__kernel void osprey_matmul_strips1(__global double* out, const long oo, __global const double* a, const long ao,
                                    __global const double* b, const long bo, const long rows, const long inner,
                                    const long cols) {
  osprey_matmul_strip(out, oo, a, ao, b, bo, rows, inner, cols, 1);
}

// cols == 1.
__kernel void osprey_matmul_column(__global double* out, const long oo, __global const double* a, const long ao,
                                   __global const double* b, const long bo, const long rows, const long inner,
                                   const long cols) {
  const long r0 = (long)get_global_id(1) * 8;
  if (get_global_id(0) != 0 || r0 >= rows) return;
  __global const double* ar[8];
  double acc[8];
  for (int i = 0; i < 8; ++i) {
    ar[i] = a + ao + (r0 + i < rows ? r0 + i : rows - 1) * inner;
    acc[i] = 0.0;
  }
  __global const double* bk = b + bo;
  for (long k = 0; k < inner; ++k) {
    const double bv = bk[k];
    for (int i = 0; i < 8; ++i) acc[i] = fma(ar[i][k], bv, acc[i]);
  }
  for (int i = 0; i < 8 && r0 + i < rows; ++i) out[oo + r0 + i] = acc[i];
}
)";

}  // namespace osprey::opencl_detail
