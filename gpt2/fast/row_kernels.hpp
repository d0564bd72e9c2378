// The fast handler's fused float kernels for GPT-2's row-wise layers: LayerNorm (forward and
// backward), softmax cross-entropy (forward and backward) and GELU. Each is the reference
// definition of its layer (layers/layernorm.hpp, cross_entropy.hpp, gelu.hpp: the formulas are
// repeated beside each kernel) in one pass over the row instead of a row fold and a build per
// statistic, in float with warp- or block-wide sums. nvcc units only.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/row_kernels.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpt2/fast/async_copies.hpp"   // copy16 (the cross-entropy's row cache)
#include "gpt2/fast/causal_softmax.hpp"  // warpSum, warpMax
#include "gpt2/fast/fast_math.hpp"       // fastExp2, fastReciprocal
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kRowWarps = 8;      // LayerNorm: one warp per row, 8 rows per block
constexpr int kVocabThreads = 512;  // the cross-entropy backward (a block a row) and the lm head's correction

inline unsigned rowBlocks(osprey::Index rows) { return static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps); }

// Whether p lies on a multiple of `bytes`: where a kernel may read or write 16 bytes (four floats)
// or 8 (four bf16) at once. A null pointer (an output not asked for) counts as aligned.
__host__ __device__ __forceinline__ bool alignedTo(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}
// Four floats' bf16 roundings (nearest even) at `at`, 8-byte aligned, as two pairs.
__device__ __forceinline__ void storeBf16Four(__nv_bfloat16* at, float4 v) {
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(at);
  pairs[0] = __floats2bfloat162_rn(v.x, v.y);
  pairs[1] = __floats2bfloat162_rn(v.z, v.w);
}

// A warp's walk over a row of C floats in groups of four: lane l takes groups l, l + 32, ...
// (elements 4g .. 4g + 3), each in ascending order, calling f(c, value). With C a multiple of 4 and
// the row on 16 bytes a group is one vector load; otherwise element by element, in the same order.
// The LayerNorm sums below walk rows this way, so every kernel that normalises a row (the training
// layer and the one-row products of decoding) gets the same floats.
template <class F>
__device__ __forceinline__ void walkGroups(const float* row, int C, int lane, F f) {
  if (C % 4 == 0 && alignedTo(row, 16)) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll 4
    for (int g = lane; g < C / 4; g += 32) {
      const float4 v = row4[g];
      f(4 * g, v.x);
      f(4 * g + 1, v.y);
      f(4 * g + 2, v.z);
      f(4 * g + 3, v.w);
    }
    return;
  }
  for (int g = lane; 4 * g < C; g += 32)
    for (int c = 4 * g; c < 4 * g + 4 && c < C; ++c) f(c, row[c]);
}

// A row's LayerNorm statistics, summed by one warp (walkGroups' order; every lane gets the same
// bits, as warpSum's butterfly adds the same pairs on every lane):
// mean = Σx / C;  var = Σ(x - mean)² / C;  rstd = 1 / sqrt(var + eps)
// Rows of up to 32·kHeldGroups groups on 16 bytes are read once, into registers (`held`, group
// l + 32j of lane l in held[j]); longer or unaligned rows are walked twice, with the same sums.
constexpr int kHeldGroups = 6;  // rows up to 768 floats (GPT-2 124M's width): 24 registers
struct HeldRow {
  float4 held[kHeldGroups];
  bool inRegisters = false;
};
__device__ __forceinline__ float2 rowStatistics(const float* row, int C, float eps, HeldRow& r) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int groups = C / 4;
  r.inRegisters = C % 4 == 0 && alignedTo(row, 16) && groups <= 32 * kHeldGroups;
  float sum = 0.0f, m = 0.0f, squares = 0.0f;
  const auto square = [&](float v) {
    const float d = v - m;
    squares += d * d;
  };
  if (r.inRegisters) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll
    for (int j = 0; j < kHeldGroups; ++j)
      if (lane + 32 * j < groups) r.held[j] = row4[lane + 32 * j];
#pragma unroll
    for (int j = 0; j < kHeldGroups; ++j)
      if (lane + 32 * j < groups) sum = (((sum + r.held[j].x) + r.held[j].y) + r.held[j].z) + r.held[j].w;
    m = warpSum(sum) / static_cast<float>(C);
#pragma unroll
    for (int j = 0; j < kHeldGroups; ++j)
      if (lane + 32 * j < groups) {
        square(r.held[j].x);
        square(r.held[j].y);
        square(r.held[j].z);
        square(r.held[j].w);
      }
  } else {
    walkGroups(row, C, lane, [&](int, float v) { sum += v; });
    m = warpSum(sum) / static_cast<float>(C);
    walkGroups(row, C, lane, [&](int, float v) { square(v); });
  }
  return {m, rsqrtf(warpSum(squares) / static_cast<float>(C) + eps)};
}

// out = (x - mean)·rstd·w + b, with rowStatistics' mean and rstd; where `twin` is given, out's
// bf16 rounding there too (the next product's operand). A null out, or null mean and rstd, is not
// written: the twin alone, then out's floats alone when they are read (FastHandler::twinOnly).
__global__ void __launch_bounds__(kRowWarps * 32)
    layerNormForward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                     osprey::Index N, int C, float eps, __nv_bfloat16* twin = nullptr) {
  const osprey::Index n = static_cast<osprey::Index>(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (n >= N) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float* row = x + n * C;
  HeldRow held;
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
    for (int j = 0; j < kHeldGroups; ++j)
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
// Rows of up to 32·kHeldGroups groups of four, every operand on 16 bytes, are read once into
// registers and written 16 bytes at a time (lane l holds groups l, l + 32, ...); others element
// by element, the sums in the same order: the same results either way.
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
  const bool held = C % 4 == 0 && C / 4 <= 32 * kHeldGroups && alignedTo(dx, 16) && alignedTo(dout, 16) &&
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
      float4 gh[kHeldGroups], xh[kHeldGroups], rh[kHeldGroups];
#pragma unroll
      for (int j = 0; j < kHeldGroups; ++j)
        if (lane + 32 * j < C / 4) {
          gh[j] = reinterpret_cast<const float4*>(g)[lane + 32 * j];
          xh[j] = reinterpret_cast<const float4*>(row)[lane + 32 * j];
          if (dresid) rh[j] = reinterpret_cast<const float4*>(dresid + n * C)[lane + 32 * j];
        }
#pragma unroll
      for (int j = 0; j < kHeldGroups; ++j)
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
      for (int j = 0; j < kHeldGroups; ++j)
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

// GELU (tanh form), forward and backward, as byFoursKernel bodies (16 bytes a load where aligned).
//   u = sqrt(2/pi)·(x + 0.044715·x³);  gelu = 0.5·x·(1 + tanh u)
//   gelu' = 0.5·(1 + tanh u) + 0.5·x·(1 - tanh² u)·sqrt(2/pi)·(1 + 3·0.044715·x²)
constexpr float kGeluScaleF = 0.7978845608028654f, kGeluCubicF = 0.044715f;
// Each writes its output's bf16 rounding into `twin` too where one is given: GELU's output is the
// fc projection's input, its gradient the fc layer's dout. A null output writes the twin alone
// (FastHandler::twinOnly).
//
// The kernels compute those formulas through an identity rather than through tanhf:
//   g = 0.5·(1 + tanh u) = 1 / (1 + e),  e = exp(-2u)      (the logistic function of 2u)
//   gelu = x·g;   0.5·(1 - tanh² u) = 2·g·(1 - g) = 2·e·g²,  so  gelu' = g·(1 + 2·x·e·g·du)
// with du = sqrt(2/pi)·(1 + 3·0.044715·x²): one exponential and one reciprocal (ex2.approx,
// rcp.approx: a few parts in 10^7) and no cancellation. CUDA's tanhf, with its branch for small
// |u|, left GELU's kernels waiting on their instructions rather than on memory (Nsight Compute's
// counts: bench/cuda/NOTES.md). exp(-2u) = inf (x below about -10) gives
// g = 0 and gelu = -0, as 0.5·x·(1 + tanh u) does; exp(-2u) = 0 gives g = 1. Subnormal values
// are flushed: they arise only where g is 0 or 1 anyway.
// exp(-2u) = 2^(x·(a + b·x²)), the constants holding -2·log2(e)·sqrt(2/pi) (and 0.044715).
constexpr float kGeluExp2F = -2.0f * 1.4426950408889634f * kGeluScaleF, kGeluExp2CubicF = kGeluExp2F * kGeluCubicF;
struct GeluGate {
  float e, g;  // exp(-2u), and 1 / (1 + exp(-2u))
};
__device__ __forceinline__ GeluGate geluGate(float v) {
  const float e = fastExp2(v * fmaf(kGeluExp2CubicF, v * v, kGeluExp2F));
  return {e, fastReciprocal(1.0f + e)};
}
__device__ __forceinline__ float geluOf(float v) { return v * geluGate(v).g; }
__device__ __forceinline__ float geluSlope(float v) {
  const auto [e, g] = geluGate(v);
  const float du = fmaf(kGeluScaleF * 3.0f * kGeluCubicF, v * v, kGeluScaleF);
  const float w = fminf(e * g, 1.0f);  // e·g = 1 - g; where e = inf, inf·0 would be NaN, not 1
  return g * fmaf(2.0f * v, w * du, 1.0f);
}
// GELU's input x (and the backward's dout) as floats, or as bf16 values (a buffer stored as bf16:
// FastHandler::withElements), read four at a time as 16 or 8 bytes.
__device__ __forceinline__ float valueOf(float v) { return v; }
__device__ __forceinline__ float valueOf(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float4 fourAt(const float* x, osprey::Index q) {
  return reinterpret_cast<const float4*>(x)[q];
}
__device__ __forceinline__ float4 fourAt(const __nv_bfloat16* x, osprey::Index q) {
  const uint2 r = reinterpret_cast<const uint2*>(x)[q];
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
template <class X = float>
struct GeluForwardBody {
  float* y;
  const X* x;
  __nv_bfloat16* twin = nullptr;
  __device__ __forceinline__ void operator()(osprey::Index i) const {
    const float out = geluOf(valueOf(x[i]));
    if (y) y[i] = out;
    if (twin) twin[i] = __float2bfloat16_rn(out);
  }
  __device__ __forceinline__ void four(osprey::Index q) const {
    const float4 v = fourAt(x, q);
    const float4 out = make_float4(geluOf(v.x), geluOf(v.y), geluOf(v.z), geluOf(v.w));
    if (y) reinterpret_cast<float4*>(y)[q] = out;
    if (twin) storeBf16Four(twin + 4 * q, out);
  }
  bool aligned() const {
    return alignedTo(y, 16) && alignedTo(x, 4 * sizeof(X)) && alignedTo(twin, 8);
  }
};
template <class X = float, class D = float>
struct GeluBackwardBody {
  float* dx;
  const D* dout;
  const X* x;
  __nv_bfloat16* twin = nullptr;
  __device__ __forceinline__ void operator()(osprey::Index i) const {
    const float out = valueOf(dout[i]) * geluSlope(valueOf(x[i]));
    if (dx) dx[i] = out;
    if (twin) twin[i] = __float2bfloat16_rn(out);
  }
  __device__ __forceinline__ void four(osprey::Index q) const {
    const float4 v = fourAt(x, q), d = fourAt(dout, q);
    const float4 out = make_float4(d.x * geluSlope(v.x), d.y * geluSlope(v.y), d.z * geluSlope(v.z),
                                   d.w * geluSlope(v.w));
    if (dx) reinterpret_cast<float4*>(dx)[q] = out;
    if (twin) storeBf16Four(twin + 4 * q, out);
  }
  bool aligned() const {
    return alignedTo(dx, 16) && alignedTo(dout, 4 * sizeof(D)) && alignedTo(x, 4 * sizeof(X)) && alignedTo(twin, 8);
  }
};

// Eight consecutive elements of one of GELU's operands as loaded: one 16-byte vector of bf16 or
// two of floats, kept packed until the row is computed, so that a row's loads wait in the fewest
// registers and take one instruction per 16 bytes. floats(v) gives them as floats, in order.
template <class E>
struct EightLoaded;
template <>
struct EightLoaded<__nv_bfloat16> {
  uint4 raw;  // elements 2k and 2k + 1 in word k, the first in the low half
  __device__ __forceinline__ void load(const __nv_bfloat16* at) { raw = __ldg(reinterpret_cast<const uint4*>(at)); }
  __device__ __forceinline__ void floats(float (&v)[8]) const {
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 pair = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[k]));
      v[2 * k] = pair.x, v[2 * k + 1] = pair.y;
    }
  }
};
template <>
struct EightLoaded<float> {
  float4 lo, hi;
  __device__ __forceinline__ void load(const float* at) {
    lo = __ldg(reinterpret_cast<const float4*>(at)), hi = __ldg(reinterpret_cast<const float4*>(at) + 1);
  }
  __device__ __forceinline__ void floats(float (&v)[8]) const {
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
  }
};
// The bits of __floats2bfloat162_rn(a, b) (storeBf16Four's roundings), a in the low half: four of
// them make a group's 16-byte store of the twin.
__device__ __forceinline__ unsigned bf16PairBits(float a, float b) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const unsigned*>(&pair);
}
// A thread's loads of one row for geluBackwardSummed: x and dout of its groups j = 0 .. G - 1.
template <class X, class D, int G>
struct GeluSumRow {
  EightLoaded<X> x[G];
  EightLoaded<D> dout[G];
};

// GELU's backward over N rows of `width` with the column sums of its output, dx = dout·gelu'(x):
// dx is the fc layer's dout, and its column sums that layer's bias gradient, so they are taken
// here, where the values are in the registers, and no pass of their own reads dx again. The sums
// are of the float values (not of the twin's roundings), in the LayerNorm backward's two stages:
// a block walks rows blockIdx, blockIdx + gridDim, ..., thread t taking the 8-column groups t,
// t + kSumThreads, ... of each row (G of them: registers for the groups it has, no more) and
// adding them into its own sums, row after row; then it writes them to partials[blockIdx] (width
// floats), which columnTotals adds in block order.
// The rows are pipelined: a thread holds two rows' loads, in register sets a and b, and issues row
// n + gridDim's loads before it computes row n, so the memory is not left idle while a block
// computes and stores. With one row in flight it was, between rows, and the kernel ran well
// behind the elementwise GeluBackwardBody over the same data (bench/cuda/NOTES.md). The sets are named, not indexed by the row (a register
// array indexed at run time lives in local memory): the loop takes two rows a pass, a's then b's,
// so every column still adds its rows in ascending order, and the sums are those of one row at a
// time, bit for bit.
// width is a multiple of 8 of at most 8·kSumThreads·kSumGroups, every operand on 16 bytes
// (geluSumsFit); dx or twin may be null, as in GeluBackwardBody, whose values these are.
constexpr int kSumThreads = 128, kSumGroups = 4;  // rows up to 4,096 wide: GPT-2's 4C takes 3 groups a thread
// Whether rows of `width` from these operands fit geluBackwardSummed (its outputs, dx and the twin,
// are fresh allocations: on 16 bytes, and so are their rows then).
template <class X, class D>
inline bool geluSumsFit(const D* dout, const X* x, osprey::Index width) {
  return width % 8 == 0 && width <= 8 * kSumThreads * kSumGroups && alignedTo(dout, 16) && alignedTo(x, 16);
}
// G: the groups a thread takes, (width / 8) / kSumThreads rounded up (a larger G is only slower).
template <class X, class D, int G>
__global__ void __launch_bounds__(kSumThreads)
    geluBackwardSummed(float* __restrict__ dx, __nv_bfloat16* __restrict__ twin, float* __restrict__ partials,
                       const D* __restrict__ dout, const X* __restrict__ x, osprey::Index N, int width) {
  static_assert(1 <= G && G <= kSumGroups, "a thread takes 1 .. kSumGroups groups of a row");
  const int groups = width / 8;
  float sums[G][8] = {};
  // Row n's loads into `into`, issued, not waited on.
  const auto load = [&](GeluSumRow<X, D, G>& into, osprey::Index n) {
    const osprey::Index row = n * width;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int g = static_cast<int>(threadIdx.x) + j * kSumThreads;
      if (g < groups) into.x[j].load(x + row + 8 * g), into.dout[j].load(dout + row + 8 * g);
    }
  };
  // Row n from its loads: its values written to dx and twin and added into the sums.
  const auto finish = [&](const GeluSumRow<X, D, G>& from, osprey::Index n) {
    const osprey::Index row = n * width;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int g = static_cast<int>(threadIdx.x) + j * kSumThreads;
      if (g >= groups) continue;
      float v[8], d[8], out[8];
      from.x[j].floats(v), from.dout[j].floats(d);
#pragma unroll
      for (int k = 0; k < 8; ++k) out[k] = d[k] * geluSlope(v[k]);
      const osprey::Index at = row + 8 * g;
      if (dx) {
        float4* to = reinterpret_cast<float4*>(dx + at);
        to[0] = make_float4(out[0], out[1], out[2], out[3]);
        to[1] = make_float4(out[4], out[5], out[6], out[7]);
      }
      if (twin)
        *reinterpret_cast<uint4*>(twin + at) = make_uint4(bf16PairBits(out[0], out[1]), bf16PairBits(out[2], out[3]),
                                                          bf16PairBits(out[4], out[5]), bf16PairBits(out[6], out[7]));
#pragma unroll
      for (int k = 0; k < 8; ++k) sums[j][k] += out[k];
    }
  };
  const osprey::Index step = gridDim.x;
  GeluSumRow<X, D, G> a, b;
  osprey::Index n = blockIdx.x;
  if (n < N) load(a, n);
#pragma unroll 1
  for (; n < N; n += 2 * step) {  // a holds row n's loads
    if (n + step < N) load(b, n + step);
    finish(a, n);
    if (n + step >= N) break;
    if (n + 2 * step < N) load(a, n + 2 * step);
    finish(b, n + step);
  }
#pragma unroll
  for (int j = 0; j < G; ++j) {
    const int g = static_cast<int>(threadIdx.x) + j * kSumThreads;
    if (g >= groups) continue;
    float4* to = reinterpret_cast<float4*>(partials + static_cast<std::size_t>(blockIdx.x) * width + 8 * g);
    to[0] = make_float4(sums[j][0], sums[j][1], sums[j][2], sums[j][3]);
    to[1] = make_float4(sums[j][4], sums[j][5], sums[j][6], sums[j][7]);
  }
}

// AdamW (layers/adamw.hpp), one pass over the tensor:
//   m' = m + (1 - beta1)·(g - m);  v' = v·beta2 + ((1 - beta2)·g)·g
//   p' = p·keep + (stepSize·m') / (sqrt(v') / sqrt(bc2) + eps)     (keep = 1 - lr·wd where decayed)
// stepSize = -lr / bc1 and the bias corrections are computed once, on the host, as the reference does.
// Where `twin` is given, the new parameter's bf16 rounding is written there too: the next step's
// products read the weights' twins.
struct AdamWBody {
  float *param, *m, *v;
  const float *oldParam, *grad, *oldM, *oldV;
  float beta1, beta2, keep, stepSize, bc2Sqrt, eps;
  __nv_bfloat16* twin = nullptr;
  // One element's update: the new (param, m, v) from the old ones and the gradient.
  __device__ __forceinline__ float3 update(float p, float g, float mOld, float vOld) const {
    const float m1 = mOld + (1.0f - beta1) * (g - mOld);
    const float v1 = vOld * beta2 + ((1.0f - beta2) * g) * g;
    return {p * keep + (stepSize * m1) / (sqrtf(v1) / bc2Sqrt + eps), m1, v1};
  }
  __device__ __forceinline__ void operator()(osprey::Index i) const {
    const float3 r = update(oldParam[i], grad[i], oldM[i], oldV[i]);
    param[i] = r.x, m[i] = r.y, v[i] = r.z;
    if (twin) twin[i] = __float2bfloat16_rn(r.x);
  }
  // Elements 4q .. 4q + 3, each tensor read and written 16 bytes at a time (all of them aligned).
  __device__ __forceinline__ void four(osprey::Index q) const {
    const float4 p = reinterpret_cast<const float4*>(oldParam)[q], g = reinterpret_cast<const float4*>(grad)[q];
    const float4 m0 = reinterpret_cast<const float4*>(oldM)[q], v0 = reinterpret_cast<const float4*>(oldV)[q];
    const float3 a = update(p.x, g.x, m0.x, v0.x), b = update(p.y, g.y, m0.y, v0.y);
    const float3 c = update(p.z, g.z, m0.z, v0.z), d = update(p.w, g.w, m0.w, v0.w);
    const float4 updated = make_float4(a.x, b.x, c.x, d.x);
    reinterpret_cast<float4*>(param)[q] = updated;
    reinterpret_cast<float4*>(m)[q] = make_float4(a.y, b.y, c.y, d.y);
    reinterpret_cast<float4*>(v)[q] = make_float4(a.z, b.z, c.z, d.z);
    if (twin) storeBf16Four(twin + 4 * q, updated);
  }
  bool aligned() const {
    for (const void* p : {static_cast<const void*>(param), static_cast<const void*>(m), static_cast<const void*>(v),
                          static_cast<const void*>(oldParam), static_cast<const void*>(grad),
                          static_cast<const void*>(oldM), static_cast<const void*>(oldV)})
      if (!alignedTo(p, 16)) return false;
    return alignedTo(twin, 8);
  }
};

// body over n elements from `first`, `stride` apart: four at a time where every tensor is aligned
// (then the rest one by one), else one by one.
template <class Body>
__device__ __forceinline__ void eachByFours(const Body& body, osprey::Index n, bool byFours, osprey::Index first,
                                            osprey::Index stride) {
  const osprey::Index groups = byFours ? n / 4 : 0;
  for (osprey::Index q = first; q < groups; q += stride) body.four(q);
  for (osprey::Index i = 4 * groups + first; i < n; i += stride) body(i);
}

// body over n elements (AdamW, GELU): a thread per group, a grid's worth of groups at a time.
template <class Body>
__global__ void __launch_bounds__(256) byFoursKernel(Body body, osprey::Index n, bool byFours) {
  eachByFours(body, n, byFours, static_cast<osprey::Index>(blockIdx.x) * blockDim.x + threadIdx.x,
              static_cast<osprey::Index>(gridDim.x) * blockDim.x);
}

// AdamW over up to kAdamWTensors tensors in one launch, their bodies passed as the kernel's
// parameter: tensor i's blocks are [firstBlock[i], firstBlock[i + 1]), each thread about
// kAdamWGroups groups of four. A GPT-2 step's 148 tensors take 7 launches instead of 148, and its
// 100 small ones (biases, LayerNorm gains: a few µs each, mostly waiting for their launch) ride
// along with the large ones. Each element's update is AdamWBody's, so the bits are those of one
// launch a tensor.
constexpr int kAdamWTensors = 24;  // 24 bodies of 88 bytes: within a kernel's 4 KB of parameters
constexpr int kAdamWGroups = 4;
struct AdamWTensors {
  AdamWBody body[kAdamWTensors];
  osprey::Index n[kAdamWTensors];
  unsigned firstBlock[kAdamWTensors + 1];
  bool fours[kAdamWTensors];
  int count;
};
__global__ void __launch_bounds__(256) adamwTensorsKernel(AdamWTensors list) {
  const unsigned block = blockIdx.x;
  int i = 0;
  while (i + 1 < list.count && block >= list.firstBlock[i + 1]) ++i;
  const osprey::Index blocks = list.firstBlock[i + 1] - list.firstBlock[i];
  eachByFours(list.body[i], list.n[i], list.fours[i],
              static_cast<osprey::Index>(block - list.firstBlock[i]) * blockDim.x + threadIdx.x, blocks * blockDim.x);
}

// Every body's update (sizes[i] elements each), kAdamWTensors tensors a launch.
inline cudaError_t adamwTensors(cudaStream_t stream, const std::vector<AdamWBody>& bodies,
                                const std::vector<osprey::Index>& sizes) {
  constexpr osprey::Index kThreads = 256, kMostBlocks = 1 << 16;  // a tensor's blocks: at most 2^16
  for (std::size_t start = 0; start < bodies.size(); start += kAdamWTensors) {
    AdamWTensors list{};
    list.count = static_cast<int>(std::min<std::size_t>(kAdamWTensors, bodies.size() - start));
    unsigned blocks = 0;
    for (int j = 0; j < list.count; ++j) {
      const AdamWBody& body = bodies[start + j];
      const bool fours = body.aligned();
      const osprey::Index n = sizes[start + j], units = fours ? (n + 3) / 4 : n;
      list.body[j] = body, list.n[j] = n, list.fours[j] = fours, list.firstBlock[j] = blocks;
      blocks += static_cast<unsigned>(
          std::clamp<osprey::Index>((units + kThreads * kAdamWGroups - 1) / (kThreads * kAdamWGroups), 1, kMostBlocks));
    }
    list.firstBlock[list.count] = blocks;
    adamwTensorsKernel<<<blocks, kThreads, 0, stream>>>(list);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace gpt2::fast_kernels
