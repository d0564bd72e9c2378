// The opencl device's own search kernel, OpenCL C written here rather than traced, as the host and
// cuda devices have theirs (the product's are in matmul_kernels.hpp).
#pragma once

namespace osprey::opencl_detail {

// It reads the view at an element offset.
inline constexpr const char* kFixedKernels = R"(
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
