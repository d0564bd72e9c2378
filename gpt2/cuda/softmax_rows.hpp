// The reference causal softmax (gpt2::reference::causalSoftmax, gpt2/layers/attention.hpp) as one
// kernel for the exact cuda handler (gpt2/cuda/exact_cuda.hpp). The reference takes three
// launches over the (B·NH·T, T) scores: the maxima's row fold, the normalisers' row fold and the
// probabilities' build, each reading the table again. Here one warp takes 32 consecutive rows, one
// a lane, and walks their causal prefixes in tiles of 32 columns:
//
//   pass 1  every lane loads one column of each of the 32 rows (coalesced) into a shared tile;
//           lane l then folds row l's part of the tile into its maximum, from the first term,
//           with Larger in column order;
//   pass 2  the same with exp(pre - max) and Plus from 0.0: row l's normaliser;
//   pass 3  every lane writes exp(pre - max) / sum for one column of each row (0 past the prefix).
//
// The backward (reference::causalSoftmaxBackward) is the same shape: lane l folds row l's dot
// product of att and datt from two tiles, then every lane writes scale(att · (datt - dot)).
//
// Each row's combines are one lane's, in column order, and every term is the reference's
// expression (pre = scale(score), -fmad=false keeping each operation on its own), so the maxima,
// sums, dot products and outputs are the reference's doubles; while a lane folds, the terms of the
// whole tile were computed by all 32 lanes at once. tests/cuda/exact_cuda_test.cu compares both
// tables bit for bit, NaN, infinities and signed zeros among the inputs.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/softmax_rows.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>

#include "gpt2/layers/attention.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/math.hpp"

namespace gpt2::softmax_rows {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kWarps = 4;   // a block's warps, each on its own group of rows
constexpr int kLanes = 32;  // rows a group, and columns a tile
constexpr int kBatch = 8;   // rows whose terms a lane computes before it stores them
constexpr unsigned kWarpMask = 0xffffffffu;

// tile[i][j] = term(row r0 + i, column c0 + j) for the rows and columns the prefix holds; lane j
// computes column c0 + j of each row, kBatch rows' terms in flight before any is stored.
template <class Term>
__device__ void fillTile(double (*tile)[kLanes + 1], long long r0, long long rows, long long c0, long long len,
                         int lane, Term term) {
#pragma unroll
  for (int i0 = 0; i0 < kLanes; i0 += kBatch) {
    double held[kBatch];
    bool real[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u;
      const long long leni = __shfl_sync(kWarpMask, len, i);
      real[u] = r0 + i < rows && c0 + lane < leni;
      if (real[u]) held[u] = term(i, c0 + lane);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      if (real[u]) tile[i0 + u][lane] = held[u];
  }
}

// The longest of the warp's rows.
__device__ long long groupMost(long long len) {
  long long most = len;
  for (int offset = 16; offset > 0; offset /= 2) {
    const long long other = __shfl_xor_sync(kWarpMask, most, offset);
    most = other > most ? other : most;
  }
  return most;
}

// How many of row `lane`'s terms tile k holds.
__device__ int tileCount(long long len, long long k) {
  const long long left = len - k * kLanes;
  return left <= 0 ? 0 : left < kLanes ? static_cast<int>(left) : kLanes;
}

__global__ void __launch_bounds__(kWarps * kLanes)
    causalSoftmaxRows(double* __restrict__ att, const double* __restrict__ scores, long long rows, long long T,
                      osprey::math::DivideBy scale) {
  __shared__ double tiles[kWarps][kLanes][kLanes + 1];
  __shared__ double maxOf[kWarps][kLanes];
  const int lane = static_cast<int>(threadIdx.x) % kLanes, warp = static_cast<int>(threadIdx.x) / kLanes;
  double (*tile)[kLanes + 1] = tiles[warp];
  const long long group = static_cast<long long>(blockIdx.x) * kWarps + warp;
  const long long r0 = group * kLanes;
  if (r0 >= rows) return;
  const long long r = r0 + lane;
  const long long len = r < rows ? r % T + 1 : 0;  // detail::CausalPrefix
  const long long tilesOfGroup = (groupMost(len) + kLanes - 1) / kLanes;
  const auto pre = [&](int i, long long c) { return scale(scores[(r0 + i) * T + c]); };

  // Pass 1: the maximum, folded from the first term (reference: foldRaggedRowsFromFirst, Larger).
  double m = 0.0;
  for (long long k = 0; k < tilesOfGroup; ++k) {
    fillTile(tile, r0, rows, k * kLanes, len, lane, pre);
    __syncwarp();
    const int count = tileCount(len, k);
    int e = 0;
    if (k == 0 && count > 0) m = tile[lane][e++];
    for (; e < count; ++e) m = Larger{}(m, tile[lane][e]);
    __syncwarp();
  }
  maxOf[warp][lane] = m;
  __syncwarp();
  const double* maxima = maxOf[warp];
  const auto term = [&](int i, long long c) { return osprey::math::exp(pre(i, c) - maxima[i]); };
  // Pass 2: the normaliser, the sum of exp(pre - max) from 0.0 (reference: sumRaggedRows).
  double sum = 0.0;
  for (long long k = 0; k < tilesOfGroup; ++k) {
    fillTile(tile, r0, rows, k * kLanes, len, lane, term);
    __syncwarp();
    const int count = tileCount(len, k);
    for (int e = 0; e < count; ++e) sum = Plus{}(sum, tile[lane][e]);
    __syncwarp();
  }
  // Pass 3: the probabilities, every column of every row of the group, kBatch columns of a lane
  // computed before any is stored.
  for (int i = 0; i < kLanes && r0 + i < rows; ++i) {
    const long long leni = __shfl_sync(kWarpMask, len, i);
    const double si = __shfl_sync(kWarpMask, sum, i);
    double* row = att + (r0 + i) * T;
    for (long long c0 = lane; c0 < T; c0 += kBatch * kLanes) {
      double p[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const long long c = c0 + u * kLanes;
        p[u] = c < leni ? term(i, c) / si : 0.0;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (c0 + u * kLanes < T) row[c0 + u * kLanes] = p[u];
    }
  }
}

// The backward's per-row part (reference::causalSoftmaxBackward): pass 1 folds row l's dot
// product sum_t2 att · datt over its prefix in lane l (fused multiply-adds in column order, from
// a tile of each factor), pass 2 writes scale(att · (datt - dot)) for every column, 0 past the
// prefix. Two tiles a warp, so half the warps a block of the forward's.
constexpr int kBackwardWarps = 2;

__global__ void __launch_bounds__(kBackwardWarps * kLanes)
    causalSoftmaxBackwardRows(double* __restrict__ dscore, const double* __restrict__ att,
                              const double* __restrict__ datt, long long rows, long long T,
                              osprey::math::DivideBy scale) {
  __shared__ double attTiles[kBackwardWarps][kLanes][kLanes + 1], dattTiles[kBackwardWarps][kLanes][kLanes + 1];
  const int lane = static_cast<int>(threadIdx.x) % kLanes, warp = static_cast<int>(threadIdx.x) / kLanes;
  double (*attTile)[kLanes + 1] = attTiles[warp];
  double (*dattTile)[kLanes + 1] = dattTiles[warp];
  const long long r0 = (static_cast<long long>(blockIdx.x) * kBackwardWarps + warp) * kLanes;
  if (r0 >= rows) return;
  const long long r = r0 + lane;
  const long long len = r < rows ? r % T + 1 : 0;  // detail::CausalPrefix
  const long long tilesOfGroup = (groupMost(len) + kLanes - 1) / kLanes;
  // Pass 1: the row's dot product (reference: dotRaggedRows, FusedMultiplyAdd from +0.0).
  double dot = 0.0;
  for (long long k = 0; k < tilesOfGroup; ++k) {
    fillTile(attTile, r0, rows, k * kLanes, len, lane, [&](int i, long long c) { return att[(r0 + i) * T + c]; });
    fillTile(dattTile, r0, rows, k * kLanes, len, lane, [&](int i, long long c) { return datt[(r0 + i) * T + c]; });
    __syncwarp();
    const int count = tileCount(len, k);
    for (int e = 0; e < count; ++e) dot = FusedMultiplyAdd{}(dot, Product{attTile[lane][e], dattTile[lane][e]});
    __syncwarp();
  }
  // Pass 2: dscore for every column of every row of the group.
  for (int i = 0; i < kLanes && r0 + i < rows; ++i) {
    const long long leni = __shfl_sync(kWarpMask, len, i);
    const double di = __shfl_sync(kWarpMask, dot, i);
    const long long base = (r0 + i) * T;
    for (long long c = lane; c < T; c += kLanes)
      dscore[base + c] = c < leni ? scale(att[base + c] * (datt[base + c] - di)) : 0.0;
  }
}

}  // namespace

// detail::causalSoftmax's answer on handler H (a GpuCuda): the probabilities in one launch. The
// caller (detail::causalSoftmax) has checked the shape and the scores' length.
template <class H>
osprey::Result<Buf<H>> causalSoftmaxOneLaunch(H& h, const Buf<H>& scores, osprey::Index R, osprey::Index T,
                                              osprey::math::DivideBy scale) {
  if (R == 0) return reference::causalSoftmax(h, scores, R, T, scale);
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> att = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, R * T));
  const osprey::Index groups = (R + kLanes - 1) / kLanes;
  const osprey::Index blocks = (groups + kWarps - 1) / kWarps;
  OSPREY_CHECK(device->launchOwn("causal softmax (one launch)", [&](cudaStream_t stream) {
    causalSoftmaxRows<<<static_cast<unsigned>(blocks), kWarps * kLanes, 0, stream>>>(att.data(), scores.data(), R, T,
                                                                                     scale);
    return cudaGetLastError();
  }));
  return att;
}

// detail::causalSoftmaxBackward's answer on handler H (a GpuCuda): dscore in one launch, the
// shapes checked by the caller.
template <class H>
osprey::Result<Buf<H>> causalSoftmaxBackwardOneLaunch(H& h, const Buf<H>& att, const Buf<H>& datt, osprey::Index R,
                                                      osprey::Index T, osprey::math::DivideBy scale) {
  if (R == 0) return reference::causalSoftmaxBackward(h, att, datt, R, T, scale);
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> dscore = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, R * T));
  const osprey::Index groups = (R + kLanes - 1) / kLanes;
  const osprey::Index blocks = (groups + kBackwardWarps - 1) / kBackwardWarps;
  OSPREY_CHECK(device->launchOwn("causal softmax backward (one launch)", [&](cudaStream_t stream) {
    causalSoftmaxBackwardRows<<<static_cast<unsigned>(blocks), kBackwardWarps * kLanes, 0, stream>>>(
        dscore.data(), att.data(), datt.data(), R, T, scale);
    return cudaGetLastError();
  }));
  return dscore;
}

}  // namespace gpt2::softmax_rows
