// The kernels a recorded exact decoding step adds to the model's own (gpt2/cuda/recorded_cuda.hpp):
// the steps that read or move the device-side position. Each computes what the reference computes
// with the position as a host number, the same operations on the same doubles.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/recorded_kernels.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <climits>

#include "gpt2/model/generate.hpp"

namespace gpt2::recorded_kernels {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// *position = value, queued in stream order.
__global__ void storePosition(int* position, int value) { *position = value; }

// Row *position of the keys and values grows by columns [C, 2C) and [2C, 3C) of qkv (3C): the
// reference's appendRowSlice, written into the cache's room instead of a grown copy.
__global__ void appendAtPosition(double* keys, double* values, const double* qkv, const int* position, long long C) {
  const long long c = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const long long at = static_cast<long long>(*position) * C + c;
  keys[at] = qkv[C + c];
  values[at] = qkv[2 * C + c];
}

constexpr int kChooseThreads = 1024;
constexpr int kChooseAhead = 8;

// Two candidates for the first occurrence of the largest logit: the other one wins if it is larger,
// or equal (-0.0 and +0.0 included) and earlier.
struct Candidate {
  double value;
  long long index;
};
__device__ __forceinline__ Candidate earlierMaximum(Candidate mine, Candidate other) {
  return other.value > mine.value || (other.value == mine.value && other.index < mine.index) ? other : mine;
}

// The end of a greedy choice whose threads (kChooseThreads of one block) each hold `mine`, the
// earliest largest of the logits they read: the block's earliest largest by earlierMaximum; a
// largest logit that is not finite chooses no token (-1, and the value kept for the error); the
// position moves on by one, the token is written to tokens[position] (pinned host memory) and its
// embedding wte[token] + wpe[position] (the reference encoder's one addition) to `embedding`, the
// next step's encoder output.
__device__ void chooseThenEmbedFrom(Candidate mine, long long V, int* position, int* tokens, double* bests,
                                    double* embedding, const double* wte, const double* wpe, long long C,
                                    long long maxT) {
  __shared__ Candidate ofWarp[kChooseThreads / 32];
  __shared__ long long chosen;
  __shared__ int next;
  const int t = static_cast<int>(threadIdx.x);
  for (int offset = 16; offset > 0; offset /= 2) {
    const Candidate other{__shfl_xor_sync(0xffffffffu, mine.value, offset),
                          __shfl_xor_sync(0xffffffffu, mine.index, offset)};
    mine = earlierMaximum(mine, other);
  }
  if (t % 32 == 0) ofWarp[t / 32] = mine;
  __syncthreads();
  if (t == 0) {
    Candidate best = ofWarp[0];
    for (int w = 1; w < kChooseThreads / 32; ++w) best = earlierMaximum(best, ofWarp[w]);
    const double b = best.value;
    chosen = isfinite(b) && best.index < V ? best.index : -1;
    next = *position + 1;
    *position = next;
    if (next < maxT) {  // a replay past the context's end is never queued; nothing is written if one were
      tokens[next] = static_cast<int>(chosen);
      bests[next] = b;
    }
  }
  __syncthreads();
  if (chosen < 0 || next >= maxT) return;
  for (long long c = t; c < C; c += kChooseThreads) embedding[c] = wte[chosen * C + c] + wpe[next * C + c];
}

// The greedy choice of gpt2::greedyToken, then the chosen token's embedding at the next position:
//   * the largest logit as `largest` finds it, and the smallest index holding it (indexOf: the first
//     i with logits[i] == best): the element-order fold of maxCombine returns the first occurrence
//     of the maximum (generate.hpp says why), so each thread folds its elements (t, t + 1024, ...)
//     in order into its own first maximum and its index, and the threads' candidates combine by
//     earlierMaximum, which keeps the earliest of the largest: the same element, so the same double
//     and the same index. NaN never wins (a comparison with it is false); with no element above
//     -inf the value is -inf, not finite;
//   * then chooseThenEmbedFrom: the token, the position, the next embedding.
__global__ void __launch_bounds__(kChooseThreads)
    chooseThenEmbed(const double* logits, long long V, int* position, int* tokens, double* bests, double* embedding,
                    const double* wte, const double* wpe, long long C, long long maxT) {
  const int t = static_cast<int>(threadIdx.x);
  Candidate mine{-HUGE_VAL, LLONG_MAX};
  // The thread's elements in order, kChooseAhead loads in flight before their comparisons.
  for (long long i0 = t; i0 < V; i0 += kChooseAhead * kChooseThreads) {
    double v[kChooseAhead];
#pragma unroll
    for (int u = 0; u < kChooseAhead; ++u) {
      const long long i = i0 + static_cast<long long>(u) * kChooseThreads;
      v[u] = i < V ? logits[i] : 0.0;
    }
#pragma unroll
    for (int u = 0; u < kChooseAhead; ++u) {
      const long long i = i0 + static_cast<long long>(u) * kChooseThreads;
      if (i < V && v[u] > mine.value) mine = Candidate{v[u], i};
    }
  }
  chooseThenEmbedFrom(mine, V, position, tokens, bests, embedding, wte, wpe, C, maxT);
}

}  // namespace
}  // namespace gpt2::recorded_kernels
