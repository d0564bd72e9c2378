// One thread's in-order chains over values it reads from memory, for the recorded decoding step's
// attention kernel (attend_row.hpp; the products and LayerNorms use the tensor cores' chains of
// osprey/gpu/cuda/kernels/row_dmma.hpp): kAhead terms are loaded together before their
// combines run, so the loads overlap while the combines keep their order, and their bits.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/chains.hpp is compiled by nvcc only (a .cu file)"
#endif

#include "osprey/math.hpp"

namespace gpt2::chains {

constexpr int kAhead = 8;  // terms a chain reads together

// acc = combine(acc, v[i]) for i = from .. end - 1, in order.
template <class Combine>
__device__ __forceinline__ double fold(const double* v, int from, int end, double acc, Combine combine) {
  int i = from;
  for (; i + kAhead <= end; i += kAhead) {
    double t[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) t[u] = v[i + u];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) acc = combine(acc, t[u]);
  }
  for (; i < end; ++i) acc = combine(acc, v[i]);
  return acc;
}

// The contract's dot product: acc = fma(a[i], b[i], acc) for i = 0 .. n - 1 from +0.0, in order.
__device__ __forceinline__ double dot(const double* a, const double* b, int n) {
  double acc = 0.0;
  int i = 0;
  for (; i + kAhead <= n; i += kAhead) {
    double x[kAhead], y[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      x[u] = a[i + u];
      y[u] = b[i + u];
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) acc = osprey::math::fma(x[u], y[u], acc);
  }
  for (; i < n; ++i) acc = osprey::math::fma(a[i], b[i], acc);
  return acc;
}

}  // namespace gpt2::chains
