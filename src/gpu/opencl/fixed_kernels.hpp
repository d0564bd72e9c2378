// The opencl device's own kernels, OpenCL C written here rather than traced: the product and the
// search, as the host and cuda devices have theirs.
#pragma once

namespace osprey::opencl_detail {

// Both read views at an element offset.
inline constexpr const char* kFixedKernels = R"(
// out (rows, cols) = a (rows, inner) * b (inner, cols): each output one fma chain over k
// ascending from +0.0, the contract's product.
__kernel void osprey_matmul(__global double* out, const long oo, __global const double* a, const long ao,
                            __global const double* b, const long bo, const long rows, const long inner,
                            const long cols) {
  const long c = (long)get_global_id(0), r = (long)get_global_id(1);
  if (r >= rows || c >= cols) return;
  __global const double* ar = a + ao + r * inner;
  __global const double* bc = b + bo + c;
  double acc = 0.0;
  for (long k = 0; k < inner; ++k) acc = fma(ar[k], bc[k * cols], acc);
  out[oo + r * cols + c] = acc;
}

// firsts[g]: the smallest i in chunk g with v[i] == x, else n.
__kernel void osprey_index_of(__global long* firsts, __global const double* v, const long vo, const long n,
                              const double x, const long chunk) {
  const long g = (long)get_global_id(0);
  const long lo = g * chunk;
  const long hi = lo + chunk < n ? lo + chunk : n;
  long found = n;
  for (long i = lo; i < hi; ++i)
    if (v[vo + i] == x) { found = i; break; }
  firsts[g] = found;
}
)";

}  // namespace osprey::opencl_detail
