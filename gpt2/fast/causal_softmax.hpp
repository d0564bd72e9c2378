// The fast handler's causal softmax over attention scores, forward and backward, in float: one
// warp per (batch, head, query) row, the row read from L1/L2 (a 1024-position row is 4 KiB), the
// sums and maxima folded across the warp by shuffles. nvcc units only.
//
//   forward   att[t2]   = exp(s·pre[t2] - m) / Σ exp(s·pre[t2'] - m)   t2 <= t, else 0
//             m = max_t2 s·pre[t2],  s = 1/sqrt(hs)                   (in place: scores -> att)
//   backward  dpre[t2]  = s · att[t2] · (datt[t2] - Σ_t2' att[t2'] datt[t2'])   t2 <= t, else 0
//                                                                     (in place: datt -> dpre)
//
// The definitions are attention.hpp's reference (its pre, att and dscore); only the arithmetic
// differs: float, expf, a warp's grouping of the sums (docs/FAST.md).
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/causal_softmax.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/result.hpp"

namespace gpt2::fast_kernels {
namespace {  // internal linkage: every unit launches its own copy (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kSoftmaxWarps = 8;  // rows per block

__device__ __forceinline__ float warpMax(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
// The sum over each aligned group of Lanes lanes (a power of two), in every lane of the group.
template <int Lanes>
__device__ __forceinline__ float groupSum(float x) {
  for (int o = Lanes / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warpSum(float x) { return groupSum<32>(x); }

// rows = B·NH·T rows of T scores each; row r's query position is r % T.
__global__ void __launch_bounds__(kSoftmaxWarps * 32)
    causalSoftmaxForward(float* scores, osprey::Index rows, int T, float scale) {
  const osprey::Index r = static_cast<osprey::Index>(blockIdx.x) * kSoftmaxWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32), t = static_cast<int>(r % T);
  float* row = scores + r * T;
  float m = -INFINITY;
  for (int j = lane; j <= t; j += 32) m = fmaxf(m, row[j] * scale);
  m = warpMax(m);
  float sum = 0.0f;
  for (int j = lane; j <= t; j += 32) sum += __expf(row[j] * scale - m);
  const float inverse = 1.0f / warpSum(sum);
  for (int j = lane; j < T; j += 32) row[j] = j <= t ? __expf(row[j] * scale - m) * inverse : 0.0f;
}

__global__ void __launch_bounds__(kSoftmaxWarps * 32)
    causalSoftmaxBackward(float* datt, const float* att, osprey::Index rows, int T, float scale) {
  const osprey::Index r = static_cast<osprey::Index>(blockIdx.x) * kSoftmaxWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32), t = static_cast<int>(r % T);
  float* g = datt + r * T;
  const float* a = att + r * T;
  float dot = 0.0f;
  for (int j = lane; j <= t; j += 32) dot += a[j] * g[j];
  dot = warpSum(dot);
  for (int j = lane; j < T; j += 32) g[j] = j <= t ? scale * (a[j] * (g[j] - dot)) : 0.0f;
}

inline unsigned softmaxBlocks(osprey::Index rows) {
  return static_cast<unsigned>((rows + kSoftmaxWarps - 1) / kSoftmaxWarps);
}

}  // namespace

// In place: scores (rows, T) -> att.
inline osprey::Result<void> causalSoftmax(cudaStream_t stream, float* scores, osprey::Index rows, osprey::Index T,
                                          float scale) {
  if (rows == 0) return {};
  causalSoftmaxForward<<<softmaxBlocks(rows), kSoftmaxWarps * 32, 0, stream>>>(scores, rows, static_cast<int>(T), scale);
  OSPREY_CUDA_CHECK(cudaGetLastError(), "fast causal softmax launch");
  return {};
}

// In place: datt (rows, T) -> the gradient of the unscaled scores.
inline osprey::Result<void> causalSoftmaxGradient(cudaStream_t stream, float* datt, const float* att, osprey::Index rows, osprey::Index T,
                                                  float scale) {
  if (rows == 0) return {};
  causalSoftmaxBackward<<<softmaxBlocks(rows), kSoftmaxWarps * 32, 0, stream>>>(datt, att, rows, static_cast<int>(T), scale);
  OSPREY_CUDA_CHECK(cudaGetLastError(), "fast causal softmax backward launch");
  return {};
}

}  // namespace gpt2::fast_kernels
