// Row folds in three shapes: a block a row, a warp a row, and a tree for regroupable combines.
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

// The same row folds with a warp a row, for many rows (the cross-entropy's 4,096 rows of 50,257
// logits; raggedly long rows alike): the warp's lanes load the next kWarpFoldChunk terms of its row
// into registers, neighbouring lanes neighbouring columns, while lane 0 combines the chunk before
// it from shared memory in column order, kWarpFoldAhead terms read ahead of its chain. Each row's
// combines are still one thread's, in column order, so the bits are rowFoldKernel's. A block a row
// leaves too few rows in flight for many long rows, and a lane a row over tiles of 32 rows read 32
// short pieces of rows far apart and streamed at a tenth of the memory's rate (bench/cuda/NOTES.md).
constexpr int kWarpFoldWarps = 8;
constexpr int kWarpFoldChunk = 256;  // a row's terms a warp loads at once (8 a lane)
constexpr int kWarpFoldAhead = 8;    // the combining lane's shared-memory loads issued together
// A warp a row pays once there are rows for every warp of about half the multiprocessors; fewer
// rows (a decoding step's heads) keep a block a row, whose many blocks fill in parallel.
constexpr Index kWarpFoldMinRows = 2048;
constexpr int kWarpFoldBlocksPerProcessor = 8;

template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kWarpFoldWarps * 32)
    warpRowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                      unsigned long long launch) {
  using Value = decltype(term(Index{}, Index{}));
  constexpr int kPerLane = kWarpFoldChunk / 32;
  __shared__ Value chunks[kWarpFoldWarps][kWarpFoldChunk];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  Value* chunk = chunks[warp];
  for (Index r = static_cast<Index>(blockIdx.x) * kWarpFoldWarps + warp; r < rows;
       r += static_cast<Index>(gridDim.x) * kWarpFoldWarps) {
    const Index cols = length(r);
    Value held[kPerLane];
    const auto load = [&](Index c0) {
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const Index c = c0 + u * 32 + lane;
        if (c < cols) held[u] = term(r, c);
      }
    };
    if (cols > 0) load(0);
    Scalar acc = seed;
    for (Index c0 = 0; c0 < cols; c0 += kWarpFoldChunk) {
#pragma unroll
      for (int u = 0; u < kPerLane; ++u)
        if (c0 + u * 32 + lane < cols) chunk[u * 32 + lane] = held[u];
      __syncwarp();
      if (c0 + kWarpFoldChunk < cols) load(c0 + kWarpFoldChunk);  // in flight while lane 0 combines
      if (lane == 0) {
        const int count = cols - c0 < kWarpFoldChunk ? static_cast<int>(cols - c0) : kWarpFoldChunk;
        int e = 0;
        if constexpr (std::is_same_v<Value, Scalar>) {
          if (c0 == 0 && fromFirst) acc = chunk[e++];
        }
        for (; e + kWarpFoldAhead <= count; e += kWarpFoldAhead) {
          Value v[kWarpFoldAhead];
#pragma unroll
          for (int u = 0; u < kWarpFoldAhead; ++u) v[u] = chunk[e + u];
#pragma unroll
          for (int u = 0; u < kWarpFoldAhead; ++u) acc = combine(acc, v[u]);
        }
        for (; e < count; ++e) acc = combine(acc, chunk[e]);
      }
      __syncwarp();  // the chunk is combined before the lanes overwrite it
    }
    if (lane == 0) out[r] = static_cast<Out>(finish(r, acc));
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
