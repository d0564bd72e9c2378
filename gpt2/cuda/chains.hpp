// In-order chains over values a thread or a warp reads, for the recorded decoding step's attention
// kernel (attend_row.hpp; the products and LayerNorms use the tensor cores' chains of
// osprey/gpu/cuda/kernels/row_dmma.hpp): terms are loaded a group at a time before their combines
// run, so the loads overlap while the combines keep their order, and their bits.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/chains.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <climits>
#include <cmath>

#include "osprey/math.hpp"

namespace gpt2::chains {

constexpr int kAhead = 8;  // terms fold reads together (from shared memory)

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

// The contract's dot product acc = fma(a[i], b[i * stride], acc) for i = 0 .. n - 1 from +0.0, in
// order, b's terms read a group of Group ahead: group g + 1's loads are issued before group g's
// fmas run, so b's loads are two groups in flight at a time (for b in the L2 or memory, a round
// trip each group would otherwise bound the chain) while the fmas keep their order, and their bits.
// a is read as the fmas need it (shared memory).
template <int Group>
__device__ __forceinline__ double dotAhead(const double* a, const double* b, long long stride, int n) {
  auto loadGroup = [&](double (&into)[Group], int base) {
#pragma unroll
    for (int u = 0; u < Group; ++u) into[u] = base + u < n ? b[static_cast<long long>(base + u) * stride] : 0.0;
  };
  double acc = 0.0;
  double cur[Group];
  loadGroup(cur, 0);
  for (int base = 0; base < n; base += Group) {
    double next[Group];
    loadGroup(next, base + Group);
#pragma unroll
    for (int u = 0; u < Group; ++u)
      if (base + u < n) acc = osprey::math::fma(a[base + u], cur[u], acc);
#pragma unroll
    for (int u = 0; u < Group; ++u) cur[u] = next[u];
  }
  return acc;
}

// The fold m = select(x > m, x, m) of row[0 .. P - 1] from row[0] (gpt2::Larger, in position
// order: the reference's maximum), on the calling warp, every lane calling it and getting it. Any
// order gives that fold's value: it is the first largest by position, or row[0] where that is a
// NaN (no x > NaN), and NaNs after it are never taken (x > m is false). So each lane takes the first
// largest of its positions, the lanes' picks are combined by value and, between equal values (+0.0
// and -0.0 are equal), by the earlier position, and a NaN row[0] wins last. No pick needs no
// position: -inf has one encoding, and where every value is -inf or NaN, row[0] is -inf or NaN.
__device__ __forceinline__ double warpFirstLargest(const double* row, int P) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  double best = -INFINITY;
  int at = INT_MAX;
  for (int p = lane; p < P; p += 32) {
    const double x = row[p];
    if (x > best) {
      best = x;
      at = p;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const double otherBest = __shfl_xor_sync(0xffffffffu, best, offset);
    const int otherAt = __shfl_xor_sync(0xffffffffu, at, offset);
    if (otherBest > best || (otherBest == best && otherAt < at)) {
      best = otherBest;
      at = otherAt;
    }
  }
  const double first = row[0];
  return first != first ? first : best;
}

}  // namespace gpt2::chains
