// The softmax cross-entropy, forward and backward, the lm head's input-gradient correction and
// the padded copy of its rows.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/cross_entropy.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpt2/fast/async_copies.hpp"   // copy16 (the cross-entropy's row cache)
#include "gpt2/fast/fast_math.hpp"       // fastExp2, fastReciprocal
#include "gpt2/fast/kernels/row_walks.hpp"
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// A block-wide fold of one value per thread (Threads threads; scratch holds Threads / 32), by
// warps then across them; every thread gets the result.
template <bool Max, int Threads = kVocabThreads>
__device__ float blockFold(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  v = Max ? warpMax(v) : warpSum(v);
  __syncthreads();  // scratch may still be read by the previous fold
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < Threads / 32 ? scratch[lane] : (Max ? -INFINITY : 0.0f);
  return Max ? warpMax(v) : warpSum(v);
}

// A target id as an index. The ids were checked before the launch and a bad one recorded as a
// fault (whose run never hands these results out); the clamp only keeps the read inside the row.
__device__ __forceinline__ int targetOf(float id, int V) {
  const int t = static_cast<int>(id);
  return t >= 0 && t < V ? t : 0;
}

// m = max_v logits;  s = Σ exp(logits - m);  probs = exp(logits - m) / s;
// loss = log(s) - (logits[target] - m). Targets were checked (ids in [0, V)) before the launch.
// Rows are ld ≥ V apart in logits and probs; probs' columns [V, ld) are written 0. The
// probabilities go to `probs` as floats (which may be the logits themselves), or (probs null) to
// `halves` rounded to bf16, the lm head backward's bf16 operand.
//
// A block takes rows blockIdx, blockIdx + gridDim, ...: the grid is one block a multiprocessor
// (crossEntropyBlocks; two of 512 threads measured slower). Each row's first `cachedGroups` groups
// of four are copied into shared memory (the lm head's 50,304 floats fit a block's 227 KB on an
// H100 or H200), every copy in flight at once, so each logit is read from memory once; a thread
// refills its groups with the next row's as it writes their probabilities. Groups beyond the
// cache (rows too wide for it) are read from memory on each pass, the last pass walking them
// backwards, from the part the pass before read last, the likeliest still in the L2 cache. Every
// thread takes the same values in the same order whatever `cachedGroups` is, so the results are
// the same bits with or without the cache. Rows on 16 bytes with ld a multiple of 4 (the lm
// head's padded rows) are read 16 bytes at a time; other rows cache nothing.
//
// Three passes over the row (the maximum, the sum, the probabilities), each of a few instructions
// a value. With the row in shared memory, one pass keeping a running maximum and a rescaled sum
// (a branch a value, which splits warps) made the kernel wait on its instructions rather than on
// memory (Nsight Compute's counts: bench/cuda/NOTES.md). exp(x - m) is 2^((x - m)·log2 e).
constexpr int kLossThreads = 1024, kLossBlocksPerSM = 1;
constexpr float kLog2eF = 1.4426950408889634f;
__global__ void __launch_bounds__(kLossThreads, kLossBlocksPerSM)
    crossEntropyForward(float* probs, float* losses, const float* logits, const float* targets, osprey::Index N,
                        int V, int ld, __nv_bfloat16* halves, int cachedGroups) {
  __shared__ float scratch[kLossThreads / 32];
  extern __shared__ float4 rowCache[];  // cachedGroups groups (crossEntropyCache)
  const int tid = static_cast<int>(threadIdx.x);
  const bool byFours = ld % 4 == 0 && alignedTo(logits, 16) && alignedTo(probs, 16) && alignedTo(halves, 8);
  if (!byFours) cachedGroups = 0;
  // Thread t copies, reads and writes groups t, t + kLossThreads, ... of every row: it waits for
  // its own copies alone, and refills a group of the cache with the next row's as soon as it has
  // written that group's probabilities, so the next row arrives while this one is finished.
  const auto cacheGroup = [&](osprey::Index n, int q) {
    copy16(rowCache + q, reinterpret_cast<const float4*>(logits + n * ld) + q, true);
  };
  for (int q = tid; q < cachedGroups && blockIdx.x < N; q += kLossThreads) cacheGroup(blockIdx.x, q);
  commitCopies();
  for (osprey::Index n = blockIdx.x; n < N; n += gridDim.x) {
    const float* row = logits + n * ld;
    const float4* groups = reinterpret_cast<const float4*>(row);
    const float targetLogit = tid == 0 ? row[targetOf(targets[n], V)] : 0.0f;  // used after the folds
    // A pass: f(x) for every value below V, thread t taking whole groups of four t, t +
    // kLossThreads, ..., then V's last partial group element by element.
    const int full = V / 4;
    const auto each = [&](auto&& f) {
      if (byFours) {
#pragma unroll 4
        for (int q = tid; q < full; q += kLossThreads) {
          const float4 x = q < cachedGroups ? rowCache[q] : groups[q];
          f(x.x), f(x.y), f(x.z), f(x.w);
        }
      } else {
        for (int q = tid; q < full; q += kLossThreads)
          f(row[4 * q]), f(row[4 * q + 1]), f(row[4 * q + 2]), f(row[4 * q + 3]);
      }
      for (int v = 4 * full + tid; v < V; v += kLossThreads) f(row[v]);
    };
    if (byFours) awaitCopies<0>();
    float m = -INFINITY;
    each([&](float x) { m = fmaxf(m, x); });
    m = blockFold<true, kLossThreads>(m, scratch);
    const auto exponential = [m](float x) { return fastExp2((x - m) * kLog2eF); };
    float s = 0.0f;
    each([&](float x) { s += exponential(x); });  // a NaN logit makes s NaN (fmaxf passes it by)
    s = blockFold<false, kLossThreads>(s, scratch);
    const float inverse = 1.0f / s;
    if (tid == 0) losses[n] = logf(s) - (targetLogit - m);
    __syncthreads();  // probs may be the logits themselves, whose target logit is read above
    const auto prob = [&](int v, float x) { return v < V ? exponential(x) * inverse : 0.0f; };
    if (byFours) {
      const int groupsWide = ld / 4;
      const osprey::Index next = n + gridDim.x;
      const auto write = [&](int q, float4 x) {
        const int v = 4 * q;
        const float4 p = make_float4(prob(v, x.x), prob(v + 1, x.y), prob(v + 2, x.z), prob(v + 3, x.w));
        if (probs) {
          reinterpret_cast<float4*>(probs + n * ld)[q] = p;
        } else {
          storeBf16Four(halves + n * ld + v, p);
        }
      };
      // The cached groups, each refilled after its store (which waits for the value read).
      int q = tid;
      for (; q < cachedGroups; q += kLossThreads) {
        write(q, rowCache[q]);
        if (next < N) cacheGroup(next, q);
      }
      commitCopies();
      // The rest backwards.
      const int last = q + ((groupsWide - 1 - q) / kLossThreads) * kLossThreads;
      for (int r = last; r >= q; r -= kLossThreads)
        if (r < groupsWide) write(r, __ldcs(groups + r));
    } else if (probs) {
      float* p = probs + n * ld;
      for (int v = tid; v < ld; v += kLossThreads) p[v] = prob(v, row[v]);
    } else {
      __nv_bfloat16* p = halves + n * ld;
      for (int v = tid; v < ld; v += kLossThreads) p[v] = __float2bfloat16_rn(prob(v, row[v]));
    }
  }
}

// How many of a row's groups of four crossEntropyForward keeps in shared memory: all of the
// row's (ld / 4), or as many as `sharedBytes` (a block's opt-in shared memory) holds beside the
// kernel's own scratch.
inline int crossEntropyCache(int ld, std::size_t sharedBytes) {
  const std::size_t own = (kLossThreads / 32) * sizeof(float) + 1024;  // scratch, and a margin
  const std::size_t room = sharedBytes > own ? (sharedBytes - own) / sizeof(float4) : 0;
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(ld / 4), room));
}

// crossEntropyForward's grid: kLossBlocksPerSM blocks a multiprocessor, or one a row if fewer.
inline unsigned crossEntropyBlocks(osprey::Index N, int multiprocessors) {
  return static_cast<unsigned>(std::max<osprey::Index>(
      std::min<osprey::Index>(N, osprey::Index{kLossBlocksPerSM} * multiprocessors), 1));
}

// dlogits = (probs - [v == target])·dloss
__global__ void __launch_bounds__(kVocabThreads)
    crossEntropyBackward(float* dlogits, const float* probs, const float* targets, osprey::Index N, int V,
                         float dloss) {
  const osprey::Index n = blockIdx.x;
  const int target = targetOf(targets[n], V);
  const float* p = probs + n * V;
  float* d = dlogits + n * V;
  for (int v = threadIdx.x; v < V; v += kVocabThreads) d[v] = (p[v] - (v == target ? 1.0f : 0.0f)) * dloss;
}

// dz (N, C) = dloss·(dz - wte[target[n]]), in place: the lm head's input gradient from the product
// probs·wte, less the one-hot's share (headLossBackward: dlogits = (probs - onehot)·dloss).
__global__ void __launch_bounds__(kVocabThreads)
    headTargetCorrection(float* dz, const float* wte, const float* targets, osprey::Index NC, int C, int V,
                         float dloss) {
  for (osprey::Index i = static_cast<osprey::Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < NC;
       i += static_cast<osprey::Index>(gridDim.x) * blockDim.x) {
    const osprey::Index n = i / C, c = i % C;
    dz[i] = dloss * (dz[i] - wte[static_cast<osprey::Index>(targetOf(targets[n], V)) * C + c]);
  }
}

// dst (rows, width) with rows ldDst apart: columns [0, cols) from src (rows ldSrc apart), columns
// [cols, width) zero (the padding a product may read as its inner dimension).
constexpr int kCopyThreads = 256;
__global__ void __launch_bounds__(kCopyThreads)
    copyRows(float* dst, osprey::Index ldDst, const float* src, osprey::Index ldSrc, osprey::Index rows, int cols,
             int width) {
  for (osprey::Index r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); c < width;
         c += static_cast<int>(blockDim.x * gridDim.x))
      dst[r * ldDst + c] = c < cols ? src[r * ldSrc + c] : 0.0f;
}
inline dim3 copyGrid(osprey::Index rows, int cols) {
  const unsigned x = static_cast<unsigned>((cols + kCopyThreads - 1) / kCopyThreads);
  const unsigned y = static_cast<unsigned>(rows < 65535 ? rows : 65535);
  return dim3(x, y);
}

}  // namespace
}  // namespace gpt2::fast_kernels
