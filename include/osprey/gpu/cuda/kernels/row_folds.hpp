// Row folds in three shapes: a block a row, a row a lane, and a tree for regroupable combines.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/row_folds.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/launch_faults.hpp"
#include "osprey/view.hpp"

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

// Row folds (gpt2/layers/fold_rows.hpp): out[r] = finish(r, the in-order fold of term(r, c) over
// c), one block per row (rows beyond the grid taken in turn). The block computes a chunk of the
// row's terms into shared memory, all threads at once for the first chunk; then thread 0 combines
// the chunk in order while warps 1.. compute the next chunk into the other buffer. The terms do
// not depend on the accumulator, so computing them early and in parallel leaves the fold's
// combines, and its bits, those of one thread walking the row.
// A row's time is its one thread's chain of combines, so what pays is many rows at once: small
// blocks (one warp combining and filling, one filling), 32 of them a multiprocessor (its most).
constexpr int kRowFoldThreads = 64;
constexpr int kRowFoldChunkBytes = 2048;  // one chunk of terms; two chunks = 4 KiB of shared memory
constexpr int kRowFoldBlocksPerProcessor = 32;
constexpr int kFillBatch = 8;  // terms a thread loads before it stores them

template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kRowFoldThreads)
    rowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                  unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  static_assert(std::is_trivially_copyable_v<L> && std::is_trivially_copyable_v<T> &&
                    std::is_trivially_copyable_v<C> && std::is_trivially_copyable_v<F>,
                "row-fold closures must be trivially copyable: capture Views and scalars by value, never owning "
                "handles (vectors, strings, buffers)");
#endif
  // A term is a Scalar, or what the combine takes besides the accumulator (a dot product's two
  // factors: gpt2/layers/fold_rows.hpp).
  using Value = decltype(term(Index{}, Index{}));
  constexpr int kRowFoldChunk = kRowFoldChunkBytes / static_cast<int>(sizeof(Value));
  __shared__ Value terms[2][kRowFoldChunk];
  const int tid = static_cast<int>(threadIdx.x);
  Index cols = 0, chunks = 0;  // of the current row
  const auto chunkLength = [&](Index k) -> int {
    const Index left = cols - k * kRowFoldChunk;
    return static_cast<int>(left < kRowFoldChunk ? left : kRowFoldChunk);
  };
  // Terms of chunk k of row r into buffer k % 2, by the threads first, first + step, ... A batch
  // of terms goes into registers before any is stored: a global load may not pass a store the
  // compiler cannot tell apart from its address, so term, store, term, store would wait out each
  // load's latency in turn; this way a batch's loads are in flight together.
  const auto fill = [&](Index r, Index k, int first, int step) {
    Value* into = terms[k % 2];
    const Index from = k * kRowFoldChunk;
    const int count = chunkLength(k);
    for (int e0 = first; e0 < count; e0 += kFillBatch * step) {
      Value held[kFillBatch];
#pragma unroll
      for (int u = 0; u < kFillBatch; ++u)
        if (e0 + u * step < count) held[u] = term(r, from + e0 + u * step);
#pragma unroll
      for (int u = 0; u < kFillBatch; ++u)
        if (e0 + u * step < count) into[e0 + u * step] = held[u];
    }
  };
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    cols = length(r);
    chunks = (cols + kRowFoldChunk - 1) / kRowFoldChunk;
    if (chunks > 0) fill(r, 0, tid, kRowFoldThreads);
    __syncthreads();
    Scalar acc = seed;
    for (Index k = 0; k < chunks; ++k) {
      if (tid == 0) {
        const Value* values = terms[k % 2];
        const int count = chunkLength(k);
        int e = 0;
        if constexpr (std::is_same_v<Value, Scalar>) {
          if (k == 0 && fromFirst) acc = values[e++];
        }
#pragma unroll 8
        for (; e < count; ++e) acc = combine(acc, values[e]);
      } else if (tid >= 32 && k + 1 < chunks) {
        fill(r, k + 1, tid - 32, kRowFoldThreads - 32);
      }
      __syncthreads();  // chunk k is combined and chunk k + 1 is in place
    }
    if (tid == 0) out[r] = static_cast<Out>(finish(r, acc));
  }
  stampFault(launch);
}

// The same row folds with one row a lane, for many rows (softmax statistics: a row per query of
// every head): each warp folds 32 consecutive rows, lane l row r0 + l, in order, from a shared
// tile of kLaneFoldChunk terms a row that the whole warp fills first (term (r0 + i, k0 + j) by the
// lane that owns tile element i·kLaneFoldChunk + j, so neighbouring lanes read neighbouring
// columns). A block per row leaves thread 0 combining while 255 threads idle; here every lane
// combines. Each row's combines are still the one thread's, in column order, so the bits are
// rowFoldKernel's.
constexpr int kLaneFoldWarps = 4;
constexpr int kLaneFoldThreads = 32 * kLaneFoldWarps;
constexpr int kLaneFoldChunk = 16;  // terms of each row per tile; 32 x 17 Values a warp
// Lanes only pay where there are rows enough for several warps on every multiprocessor: fewer,
// longer rows (a LayerNorm's, the cross-entropy's 50,257 logits) keep a block a row, whose
// threads fetch one row's terms far ahead of its single combining thread.
constexpr Index kLaneFoldRowsPerProcessor = 4 * 32;  // four warps a multiprocessor
constexpr int kLaneFoldBlocksPerProcessor = 8;

template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kLaneFoldThreads)
    laneRowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                      unsigned long long launch) {
  using Value = decltype(term(Index{}, Index{}));
  __shared__ Value tiles[kLaneFoldWarps][32][kLaneFoldChunk + 1];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  Value (*tile)[kLaneFoldChunk + 1] = tiles[warp];
  const Index warps = static_cast<Index>(gridDim.x) * kLaneFoldWarps;
  for (Index group = static_cast<Index>(blockIdx.x) * kLaneFoldWarps + warp; group * 32 < rows; group += warps) {
    const Index r0 = group * 32, r = r0 + lane;
    const Index cols = r < rows ? length(r) : 0;
    Index most = cols;  // the longest row of the warp's 32
    for (int offset = 16; offset > 0; offset /= 2) {
      const Index other = __shfl_xor_sync(0xffffffffu, most, offset);
      most = other > most ? other : most;
    }
    Scalar acc = seed;
    for (Index k0 = 0; k0 < most; k0 += kLaneFoldChunk) {
      // Tile element e = lane + 32u, u < kLaneFoldChunk: every load first, then every store (see
      // rowFoldKernel's fill for why).
      Value held[kLaneFoldChunk];
      bool real[kLaneFoldChunk];
#pragma unroll
      for (int u = 0; u < kLaneFoldChunk; ++u) {
        const int e = lane + 32 * u, i = e / kLaneFoldChunk, j = e % kLaneFoldChunk;
        real[u] = k0 + j < __shfl_sync(0xffffffffu, cols, i);
        if (real[u]) held[u] = term(r0 + i, k0 + j);
      }
#pragma unroll
      for (int u = 0; u < kLaneFoldChunk; ++u) {
        const int e = lane + 32 * u;
        if (real[u]) tile[e / kLaneFoldChunk][e % kLaneFoldChunk] = held[u];
      }
      __syncwarp();
      const Index left = cols - k0;
      const int count = left <= 0 ? 0 : left < kLaneFoldChunk ? static_cast<int>(left) : kLaneFoldChunk;
      int e = 0;
      if constexpr (std::is_same_v<Value, Scalar>) {
        if (k0 == 0 && fromFirst && count > 0) acc = tile[lane][e++];
      }
      for (; e < count; ++e) acc = combine(acc, tile[lane][e]);
      __syncwarp();  // the tile is read before the warp refills it
    }
    if (r < rows) out[r] = static_cast<Out>(finish(r, acc));
  }
  stampFault(launch);
}

constexpr int kTreeFoldThreads = 256;
constexpr int kTreeFoldWarps = kTreeFoldThreads / 32;
constexpr int kTreeFoldBlocksPerProcessor = 16;

// The same row folds for a Regroupable combine (effect.hpp; the fast handler asks for it), folded
// as a tree: thread t folds terms t, t + 256, ...; the warps fold their threads' partials by shuffles;
// thread 0 folds the warps' partials and the seed. A thread with no term holds nothing (`has`
// false), so no identity element is needed (max has none in the doubles that include NaN).
template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kTreeFoldThreads)
    treeRowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                      unsigned long long launch) {
  __shared__ Scalar partial[kTreeFoldWarps];
  __shared__ bool held[kTreeFoldWarps];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const Index cols = length(r);
    Scalar acc = 0.0;
    bool has = false;
    for (Index c = tid; c < cols; c += kTreeFoldThreads) {
      const Scalar v = term(r, c);
      acc = has ? combine(acc, v) : v;
      has = true;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const Scalar other = __shfl_down_sync(0xffffffffu, acc, offset);
      const bool otherHas = __shfl_down_sync(0xffffffffu, has, offset);
      if (otherHas) {
        acc = has ? combine(acc, other) : other;
        has = true;
      }
    }
    if (lane == 0) {
      partial[warp] = acc;
      held[warp] = has;
    }
    __syncthreads();
    if (tid == 0) {
      Scalar total = 0.0;
      bool any = false;
      for (int w = 0; w < kTreeFoldWarps; ++w) {
        if (!held[w]) continue;
        total = any ? combine(total, partial[w]) : partial[w];
        any = true;
      }
      const Scalar folded = !any ? seed : fromFirst ? total : combine(seed, total);
      out[r] = static_cast<Out>(finish(r, folded));
    }
    __syncthreads();  // partial[] is free for the next row
  }
  stampFault(launch);
}

}  // namespace
}  // namespace osprey::cuda_detail
