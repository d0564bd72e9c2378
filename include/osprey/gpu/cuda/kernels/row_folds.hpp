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
// every head; LayerNorm's and the cross-entropy's rows): a block takes 32 consecutive rows at a
// time, warp 0 folding row r0 + l in lane l, in column order, from a shared tile of
// kLaneFoldChunkBytes of terms a row, while warps 1..7 compute the next tile into the other buffer
// (the whole block fills the first), each thread's share of a tile in one batch of loads.
// Neighbouring threads fill neighbouring columns of a row, so the reads coalesce. A group's time is
// its longest row's chain of combines, overlapped with the filling: with the terms computed by
// seven warps instead of by the combining lanes themselves, a long group no longer holds the whole
// launch back by its one warp's instruction count (softmax rows run from 1 to T terms). Each row's
// combines are still one thread's, in column order, so the bits are rowFoldKernel's.
constexpr int kLaneFoldWarps = 8;
constexpr int kLaneFoldThreads = 32 * kLaneFoldWarps;
constexpr int kLaneFoldRows = 32;    // rows a block folds at once, one a lane of warp 0
constexpr int kLaneFoldChunkBytes = 512;  // of each row per tile: 64 doubles (32 x 65 a buffer)
// Lanes pay once there are groups of 32 rows for about half the multiprocessors; fewer rows (a
// decoding step's heads) keep a block a row, whose many blocks fill in parallel.
constexpr Index kLaneFoldMinRows = 64 * kLaneFoldRows;
constexpr int kLaneFoldBlocksPerProcessor = 4;
// Terms a thread loads before it stores them: 224 filling threads x 10 cover a tile of 2048.
constexpr int kLaneFillBatch = 10;

template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kLaneFoldThreads)
    laneRowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                      unsigned long long launch) {
  using Value = decltype(term(Index{}, Index{}));
  constexpr int kLaneFoldChunk = kLaneFoldChunkBytes / static_cast<int>(sizeof(Value));
  constexpr int kLaneFoldTile = kLaneFoldRows * kLaneFoldChunk;
  static_assert(kLaneFoldChunk >= 8, "a row fold's term is too large for the lanes' tiles");
  __shared__ Value tiles[2][kLaneFoldRows][kLaneFoldChunk + 1];
  __shared__ Index rowCols[kLaneFoldRows];
  __shared__ Index groupMost;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  Index r0 = 0;
  // Tile k of the group into buffer k % 2, elements first, first + step, ... (element e is row
  // e / kLaneFoldChunk, column k·kLaneFoldChunk + e % kLaneFoldChunk), a batch of loads in flight
  // before any store (rowFoldKernel's fill says why).
  const auto fill = [&](Index k, int first, int step) {
    Value (*into)[kLaneFoldChunk + 1] = tiles[k % 2];
    const Index from = k * kLaneFoldChunk;
    for (int e0 = first; e0 < kLaneFoldTile; e0 += kLaneFillBatch * step) {
      Value held[kLaneFillBatch];
      bool real[kLaneFillBatch];
#pragma unroll
      for (int u = 0; u < kLaneFillBatch; ++u) {
        const int e = e0 + u * step, i = e / kLaneFoldChunk, j = e % kLaneFoldChunk;
        real[u] = e < kLaneFoldTile && from + j < rowCols[i];
        if (real[u]) held[u] = term(r0 + i, from + j);
      }
#pragma unroll
      for (int u = 0; u < kLaneFillBatch; ++u) {
        const int e = e0 + u * step;
        if (real[u]) into[e / kLaneFoldChunk][e % kLaneFoldChunk] = held[u];
      }
    }
  };
  for (Index group = blockIdx.x; group * kLaneFoldRows < rows; group += gridDim.x) {
    r0 = group * kLaneFoldRows;
    const Index r = r0 + lane;
    if (warp == 0) {
      const Index cols = r < rows ? length(r) : 0;
      rowCols[lane] = cols;
      Index most = cols;  // the longest row of the group
      for (int offset = 16; offset > 0; offset /= 2) {
        const Index other = __shfl_xor_sync(0xffffffffu, most, offset);
        most = other > most ? other : most;
      }
      if (lane == 0) groupMost = most;
    }
    __syncthreads();
    const Index tilesOfGroup = (groupMost + kLaneFoldChunk - 1) / kLaneFoldChunk;
    if (tilesOfGroup > 0) fill(0, tid, kLaneFoldThreads);
    __syncthreads();
    Scalar acc = seed;
    for (Index k = 0; k < tilesOfGroup; ++k) {
      if (warp == 0) {
        const Value* values = tiles[k % 2][lane];
        const Index left = rowCols[lane] - k * kLaneFoldChunk;
        const int count = left <= 0 ? 0 : left < kLaneFoldChunk ? static_cast<int>(left) : kLaneFoldChunk;
        int e = 0;
        if constexpr (std::is_same_v<Value, Scalar>) {
          if (k == 0 && fromFirst && count > 0) acc = values[e++];
        }
#pragma unroll 8
        for (; e < count; ++e) acc = combine(acc, values[e]);
      } else if (k + 1 < tilesOfGroup) {
        fill(k + 1, tid - 32, kLaneFoldThreads - 32);
      }
      __syncthreads();  // tile k is combined and tile k + 1 is in place
    }
    if (warp == 0 && r < rows) out[r] = static_cast<Out>(finish(r, acc));
    __syncthreads();  // every thread has read groupMost and rowCols before the next group's
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
