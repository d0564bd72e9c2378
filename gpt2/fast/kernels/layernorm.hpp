// LayerNorm forward and backward, a warp a row, and the fixed-order column totals its backward
// (and GELU's) leaves in partial rows.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/layernorm.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpt2/fast/kernels/row_walks.hpp"
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// out = (x - mean)·rstd·w + b, with rowStatistics' mean and rstd; where `twin` is given, out's
// bf16 rounding there too (the next product's operand). A null out, or null mean and rstd, is not
// written: the twin alone, then out's floats alone when they are read (FastHandler::twinOnly).
// Rows of up to 32·Groups groups of four are held in registers (withHeldGroups chooses Groups).
template <int Groups>
__global__ void __launch_bounds__(kRowWarps * 32)
    layerNormForward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                     osprey::Index N, int C, float eps, __nv_bfloat16* twin = nullptr) {
  const osprey::Index n = static_cast<osprey::Index>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (n >= N) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float* row = x + n * C;
  HeldRow<Groups> held;
  const float2 statistics = rowStatistics(row, C, eps, held);
  const float m = statistics.x, s = statistics.y;
  float* o = out ? out + n * C : nullptr;
  __nv_bfloat16* t = twin ? twin + n * C : nullptr;
  const auto normalise = [&](int c, float v) {
    const float y = ((v - m) * s) * w[c] + b[c];
    if (o) o[c] = y;
    if (t) t[c] = __float2bfloat16_rn(y);
  };
  // A held row's groups are 16-byte aligned in x and out (rowStatistics checked x; out is laid out
  // alike): each group is written as one float4 and its twin as two bf16 pairs. The weight and bias
  // are read as float4 where they are aligned too. The values are normalise's.
  const bool wide = alignedTo(w, 16) && alignedTo(b, 16);
  if (held.inRegisters) {
#pragma unroll
    for (int j = 0; j < Groups; ++j)
      if (lane + 32 * j < C / 4) {
        const int c = 4 * (lane + 32 * j);
        const float4 v = held.held[j];
        const float4 wc = wide ? *reinterpret_cast<const float4*>(w + c) : make_float4(w[c], w[c + 1], w[c + 2], w[c + 3]);
        const float4 bc = wide ? *reinterpret_cast<const float4*>(b + c) : make_float4(b[c], b[c + 1], b[c + 2], b[c + 3]);
        const float4 y = make_float4(((v.x - m) * s) * wc.x + bc.x, ((v.y - m) * s) * wc.y + bc.y,
                                     ((v.z - m) * s) * wc.z + bc.z, ((v.w - m) * s) * wc.w + bc.w);
        if (o) *reinterpret_cast<float4*>(o + c) = y;
        if (t) storeBf16Four(t + c, y);
      }
  } else {
    walkGroups(row, C, lane, normalise);
  }
  if (lane == 0 && mean) {
    mean[n] = m;
    rstd[n] = s;
  }
}

// norm = (x - mean)·rstd,  dnorm = w·dout
// dx = ((dnorm - mean_c dnorm) - norm·mean_c(dnorm·norm))·rstd, plus dresid where it is given (the
// residual stream's gradient, added after: dresid + dx), and its bf16 rounding into `twin` where
// one is given (dx is the next linear layer's dout); and the column sums of dout·norm (dw), of
// dout (db) and, where `sumsDx`, of the dx written (the bias gradient of the linear layer whose
// dout it is), in two stages with one fixed order: a warp takes rows blockIdx·8 + warp, then a
// grid's rows further each time, adding each row into its own shared columns (`sums`,
// kRowWarps × sets·C floats of dynamic shared memory, sets = 2 or 3); then the block adds its
// warps' columns in warp order into partials[blockIdx] (sets·C: the dw sums, the db sums, the dx
// sums), and columnTotals adds the blocks' in block order.
// Rows of up to 32·Groups groups of four, every operand on 16 bytes, are read once into
// registers and written 16 bytes at a time (lane l holds groups l, l + 32, ...); others element
// by element, the sums in the same order: the same results either way.
template <int Groups>
__global__ void __launch_bounds__(kRowWarps * 32)
    layerNormBackward(float* dx, float* partials, const float* dout, const float* x, const float* w,
                      const float* mean, const float* rstd, osprey::Index N, int C, const float* dresid = nullptr,
                      __nv_bfloat16* twin = nullptr, bool sumsDx = false) {
  extern __shared__ float4 sums4[];
  float* sums = reinterpret_cast<float*>(sums4);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int width = (sumsDx ? 3 : 2) * C;  // the columns of a warp's sums and of a block's partials
  float* mine = sums + static_cast<std::size_t>(warp) * width;
  for (int c = lane; c < width; c += 32) mine[c] = 0.0f;
  const bool held = C % 4 == 0 && C / 4 <= 32 * Groups && alignedTo(dx, 16) && alignedTo(dout, 16) &&
                    alignedTo(x, 16) && alignedTo(w, 16) && alignedTo(dresid, 16) && alignedTo(twin, 8);
  // One element's dx (before dresid), and its terms of the two column sums: dout·norm, dout.
  const auto element = [](float g, float v, float wc, float m, float s, float meanDnorm, float meanDnormNorm,
                          float& normTerm) {
    const float norm = (v - m) * s, dnorm = wc * g;
    normTerm = g * norm;
    return ((dnorm - meanDnorm) - norm * meanDnormNorm) * s;
  };
  for (osprey::Index n = static_cast<osprey::Index>(blockIdx.x) * kRowWarps + warp; n < N;
       n += static_cast<osprey::Index>(gridDim.x) * kRowWarps) {
    const float* g = dout + n * C;
    const float* row = x + n * C;
    const float m = mean[n], s = rstd[n];
    float sumDnorm = 0.0f, sumDnormNorm = 0.0f;
    if (held) {
      // dresid's groups are loaded with dout's and x's, all in flight at once: loaded where they
      // are added, each waited on in turn (dx's stores before it may alias it, for the compiler),
      // they kept the kernel at two thirds of the memory's bandwidth.
      float4 gh[Groups], xh[Groups], rh[Groups];
#pragma unroll
      for (int j = 0; j < Groups; ++j)
        if (lane + 32 * j < C / 4) {
          gh[j] = reinterpret_cast<const float4*>(g)[lane + 32 * j];
          xh[j] = reinterpret_cast<const float4*>(row)[lane + 32 * j];
          if (dresid) rh[j] = reinterpret_cast<const float4*>(dresid + n * C)[lane + 32 * j];
        }
#pragma unroll
      for (int j = 0; j < Groups; ++j)
        if (lane + 32 * j < C / 4) {
          const float4 wc = reinterpret_cast<const float4*>(w)[lane + 32 * j];
          const float gs[4] = {gh[j].x, gh[j].y, gh[j].z, gh[j].w}, xs[4] = {xh[j].x, xh[j].y, xh[j].z, xh[j].w};
          const float ws[4] = {wc.x, wc.y, wc.z, wc.w};
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const float norm = (xs[k] - m) * s, dnorm = ws[k] * gs[k];
            sumDnorm += dnorm;
            sumDnormNorm += dnorm * norm;
          }
        }
      const float meanDnorm = warpSum(sumDnorm) / static_cast<float>(C);
      const float meanDnormNorm = warpSum(sumDnormNorm) / static_cast<float>(C);
#pragma unroll
      for (int j = 0; j < Groups; ++j)
        if (lane + 32 * j < C / 4) {
          const int c = 4 * (lane + 32 * j);
          const float4 wc = reinterpret_cast<const float4*>(w)[lane + 32 * j];
          float4 terms;
          float4 out = make_float4(element(gh[j].x, xh[j].x, wc.x, m, s, meanDnorm, meanDnormNorm, terms.x),
                                   element(gh[j].y, xh[j].y, wc.y, m, s, meanDnorm, meanDnormNorm, terms.y),
                                   element(gh[j].z, xh[j].z, wc.z, m, s, meanDnorm, meanDnormNorm, terms.z),
                                   element(gh[j].w, xh[j].w, wc.w, m, s, meanDnorm, meanDnormNorm, terms.w));
          // The warp's columns 16 bytes at a time (a lane's four columns are adjacent).
          float4& normSums = *reinterpret_cast<float4*>(mine + c);
          float4& doutSums = *reinterpret_cast<float4*>(mine + C + c);
          float4 a = normSums, b = doutSums;
          a.x += terms.x, a.y += terms.y, a.z += terms.z, a.w += terms.w;
          b.x += gh[j].x, b.y += gh[j].y, b.z += gh[j].z, b.w += gh[j].w;
          normSums = a, doutSums = b;
          if (dresid) out = make_float4(rh[j].x + out.x, rh[j].y + out.y, rh[j].z + out.z, rh[j].w + out.w);
          if (sumsDx) {
            float4& dxSums = *reinterpret_cast<float4*>(mine + 2 * C + c);
            float4 d = dxSums;
            d.x += out.x, d.y += out.y, d.z += out.z, d.w += out.w;
            dxSums = d;
          }
          *reinterpret_cast<float4*>(dx + n * C + c) = out;
          if (twin) storeBf16Four(twin + n * C + c, out);
        }
      continue;
    }
    // Element by element in the held path's order: lane l takes groups l, l + 32, ... of four.
    for (int q = lane; 4 * q < C; q += 32)
      for (int c = 4 * q; c < 4 * q + 4 && c < C; ++c) {
        const float norm = (row[c] - m) * s, dnorm = w[c] * g[c];
        sumDnorm += dnorm;
        sumDnormNorm += dnorm * norm;
      }
    const float meanDnorm = warpSum(sumDnorm) / static_cast<float>(C);
    const float meanDnormNorm = warpSum(sumDnormNorm) / static_cast<float>(C);
    for (int c = lane; c < C; c += 32) {
      float term;
      float out = element(g[c], row[c], w[c], m, s, meanDnorm, meanDnormNorm, term);
      mine[c] += term;
      mine[C + c] += g[c];
      if (dresid) out = dresid[n * C + c] + out;
      if (sumsDx) mine[2 * C + c] += out;
      dx[n * C + c] = out;
      if (twin) twin[n * C + c] = __float2bfloat16_rn(out);
    }
  }
  __syncthreads();
  for (int c = static_cast<int>(threadIdx.x); c < width; c += kRowWarps * 32) {
    float total = 0.0f;
    for (int k = 0; k < kRowWarps; ++k) total += sums[static_cast<std::size_t>(k) * width + c];
    partials[static_cast<std::size_t>(blockIdx.x) * width + c] = total;
  }
}

// Where columnTotals writes: column c of its sets·C goes to set c / C's vector, at c mod C (the
// LayerNorm backward's dw, db and dx sums; one set for the others).
struct ColumnSets {
  float* set[3];
  int C;
};
// The partial column sums of `rows` row groups (partials: rows × sets·C), added in a fixed order.
// A block takes kTotalsColumns columns (a 32-byte sector of each row) and cuts the rows among
// kTotalsSlots slots of threads: slot s adds rows s, s + kTotalsSlots, ... in order, kTotalsLoads
// of them loaded at once, and the slots' sums are then added pairwise (slot s and s + span, span
// halving). The partials are still in the L2 cache from their writers: what costs is the chain of
// loads each thread waits on, so many blocks with one batch of loads for up to
// kTotalsSlots·kTotalsLoads rows (a block of 32 columns had each warp walk every 8th row, several
// times slower than the bytes take: bench/cuda/NOTES.md).
constexpr int kTotalsColumns = 8, kTotalsSlots = 64, kTotalsLoads = 16;
__global__ void __launch_bounds__(kTotalsColumns * kTotalsSlots)
    columnTotals(ColumnSets out, const float* partials, int rows, int sets) {
  __shared__ float slotSums[kTotalsSlots][kTotalsColumns];
  const int j = static_cast<int>(threadIdx.x) % kTotalsColumns, slot = static_cast<int>(threadIdx.x) / kTotalsColumns;
  const int width = sets * out.C, c = static_cast<int>(blockIdx.x) * kTotalsColumns + j;
  float total = 0.0f;
  if (c < width)
    for (int first = slot; first < rows; first += kTotalsSlots * kTotalsLoads) {
      float v[kTotalsLoads];
#pragma unroll
      for (int k = 0; k < kTotalsLoads; ++k) {
        const int r = first + k * kTotalsSlots;
        v[k] = r < rows ? partials[static_cast<std::size_t>(r) * width + c] : 0.0f;
      }
#pragma unroll
      for (int k = 0; k < kTotalsLoads; ++k)
        if (first + k * kTotalsSlots < rows) total += v[k];
    }
  slotSums[slot][j] = total;
#pragma unroll
  for (int span = kTotalsSlots / 2; span > 0; span /= 2) {
    __syncthreads();
    if (slot < span) slotSums[slot][j] += slotSums[slot + span][j];
  }
  if (slot != 0 || c >= width) return;
  const int set = c / out.C;  // chosen, not indexed: an indexed parameter array would live in local memory
  (set == 0 ? out.set[0] : set == 1 ? out.set[1] : out.set[2])[c % out.C] = slotSums[0][j];
}
// columnTotals over sets·C columns, on `stream`.
inline cudaError_t launchColumnTotals(cudaStream_t stream, ColumnSets out, const float* partials, int rows, int sets) {
  columnTotals<<<static_cast<unsigned>((sets * out.C + kTotalsColumns - 1) / kTotalsColumns),
                 kTotalsColumns * kTotalsSlots, 0, stream>>>(out, partials, rows, sets);
  return cudaGetLastError();
}

}  // namespace
}  // namespace gpt2::fast_kernels
