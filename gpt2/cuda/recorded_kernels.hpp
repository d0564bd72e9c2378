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
constexpr long long kMostRuns = 4096;  // runs of kMaxRun logits in shared memory (32 KiB): V up to 262,144

// The greedy choice of gpt2::greedyToken, then the chosen token's embedding at the next position:
//   * the largest logit as `largest` finds it: the fold of each run of kMaxRun logits (in parallel,
//     each run in order), then one thread's fold of the run results in run order;
//   * a largest logit that is not finite chooses no token (-1, and the value kept for the error);
//   * otherwise the smallest index holding that value (indexOf: the first i with logits[i] == best);
//   * the position moves on by one, the token is written to tokens[position] (pinned host memory)
//     and its embedding wte[token] + wpe[position] (the reference encoder's one addition) to
//     `embedding`, the next step's encoder output.
__global__ void __launch_bounds__(kChooseThreads)
    chooseThenEmbed(const double* logits, long long V, int* position, int* tokens, double* bests, double* embedding,
                    const double* wte, const double* wpe, long long C, long long maxT) {
  __shared__ double runs[kMostRuns];
  __shared__ double best;
  __shared__ long long firstOfWarp[kChooseThreads / 32];
  __shared__ long long chosen;
  __shared__ int next;
  const int t = static_cast<int>(threadIdx.x);
  const long long R = (V + kMaxRun - 1) / kMaxRun;
  for (long long r = t; r < R; r += kChooseThreads) {
    const long long from = r * kMaxRun, end = V - from < kMaxRun ? V : from + kMaxRun;
    double m = -HUGE_VAL;
    for (long long i = from; i < end; ++i) m = maxCombine(m, logits[i]);
    runs[r] = m;
  }
  __syncthreads();
  if (t == 0) {
    double b = -HUGE_VAL;
    for (long long r = 0; r < R; ++r) b = maxCombine(b, runs[r]);
    best = b;
  }
  __syncthreads();
  const double b = best;
  const bool finite = isfinite(b);
  long long mine = LLONG_MAX;
  if (finite)
    for (long long i = t; i < V; i += kChooseThreads)
      if (logits[i] == b) {
        mine = i;
        break;
      }
  for (int offset = 16; offset > 0; offset /= 2) {
    const long long other = __shfl_xor_sync(0xffffffffu, mine, offset);
    mine = other < mine ? other : mine;
  }
  if (t % 32 == 0) firstOfWarp[t / 32] = mine;
  __syncthreads();
  if (t == 0) {
    long long first = LLONG_MAX;
    for (int w = 0; w < kChooseThreads / 32; ++w) first = firstOfWarp[w] < first ? firstOfWarp[w] : first;
    chosen = finite && first < V ? first : -1;
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

}  // namespace
}  // namespace gpt2::recorded_kernels
