// The fast handler's kernels for one-row work, the shape of batch-1 decoding: a linear layer on one
// row with its bias and the next layer's element-wise work in the same kernel, attention of one
// query against the key/value cache, and the greedy argmax on the device. nvcc units only.
//
// Decoding reads every weight once per token, so these are bandwidth kernels: a warp per output
// streams one weight row with 16-byte loads, of floats or of the bf16 copies a continuation makes
// (fast/half_weights.hpp). The formulas are the reference's (model.hpp's linear, linearGelu,
// linearResidual; attention.hpp's attentionDecode; generate.hpp's greedyToken), in float.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/decode_kernels.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "gpt2/fast/causal_softmax.hpp"  // groupSum, warpSum, warpMax
#include "gpt2/fast/row_kernels.hpp"     // geluOf, rowStatistics
#include "osprey/config.hpp"
#include "osprey/gpu/cuda/kernels/dependent_launch.hpp"

namespace gpt2::fast_kernels {

// What a one-row linear layer writes for output o, given y = (x · W)[o] + bias[o] and what
// `operand(o)` read of an earlier kernel's output (read as soon as that kernel is done, so that
// its latency passes while the product is summed).
struct Biased {
  __device__ float operand(int) const { return 0.0f; }
  __device__ float operator()(int, float y, float) const { return y; }
};
struct GeluOf {
  __device__ float operand(int) const { return 0.0f; }
  __device__ float operator()(int, float y, float) const { return geluOf(y); }
};
struct PlusResidual {
  const float* residual;
  __device__ float operand(int o) const { return residual[o]; }
  __device__ float operator()(int, float y, float residualValue) const { return residualValue + y; }
};

// What a one-row linear layer does to its input row first: nothing, or the LayerNorm in front of
// it (normLinear), computed exactly as layerNormForward computes it (the same sums in the same
// order, so the same floats) into shared memory by every block.
struct RowAsIs {};
struct RowNormalised {
  const float* weight;
  const float* bias;
  float eps;
};

namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kRowWarpsPerBlock = 8;
// A lane's loads of one weight row are issued kRowLoadsInFlight at a time before any is used: a
// decoding step is a chain of small products, each too short to hide a load's latency otherwise.
constexpr int kRowLoadsInFlight = 3;  // every row of GPT-2 124M's products, as rowSplit shares them

// How many warps share one output row (1, 2, 4 or 8): enough warps in all (about 2048, half of
// what the multiprocessors hold, so that the next kernel's blocks fit beside them) to keep every
// multiprocessor's loads in flight, and few enough loads per lane to issue them all at once.
// rowBytes: one weight row's bytes (IC times the weights' element size).
inline int rowSplit(long long rowBytes, int OC) {
  int split = 1;
  while (split < kRowWarpsPerBlock && (OC * split < 2048 || rowBytes > 16LL * 32 * kRowLoadsInFlight * split)) split *= 2;
  return split;
}

// Programmatic dependent launch: osprey/gpu/cuda/kernels/dependent_launch.hpp.
using osprey::cuda_detail::awaitEarlierKernels;
using osprey::cuda_detail::startDependents;

// The one-row products read their weights as floats or as bf16 (the copies a continuation makes,
// FastHandler::HalfWeights), 16 bytes at a time: 4 floats or 8 bf16 against the matching floats
// of x (xAt(f): x's float4 number f). A bf16 is the top half of a float's bits, so widening it is
// exact.
__device__ __forceinline__ float widened(float w) { return w; }
__device__ __forceinline__ float widened(__nv_bfloat16 w) { return __bfloat162float(w); }
__device__ __forceinline__ float lowHalf(unsigned pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float highHalf(unsigned pair) { return __uint_as_float(pair & 0xffff0000u); }
template <class W, class XAt>
__device__ __forceinline__ float vectorDot(const uint4& a, XAt xAt, int q) {
  if constexpr (std::is_same_v<W, float>) {
    const float4 b = xAt(q);
    return __uint_as_float(a.x) * b.x + __uint_as_float(a.y) * b.y + __uint_as_float(a.z) * b.z +
           __uint_as_float(a.w) * b.w;
  } else {
    const float4 b = xAt(2 * q), c = xAt(2 * q + 1);
    return lowHalf(a.x) * b.x + highHalf(a.x) * b.y + lowHalf(a.y) * b.z + highHalf(a.y) * b.w +
           lowHalf(a.z) * c.x + highHalf(a.z) * c.y + lowHalf(a.w) * c.z + highHalf(a.w) * c.w;
  }
}
__device__ __forceinline__ bool onVectors(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// y[o] = then(o, Σ_k wT[o][k]·x[k] + bias[o]) for o < OC; wT (OC, IC) row-major (floats or bf16),
// bias may be null.
// With RowNormalised, x is first replaced by its LayerNorm (IC floats of dynamic shared memory):
// every warp sums the row's statistics itself from registers (rowStatistics, in layerNormForward's
// order: the same floats as the unfused pair) and writes its share of the normalised row, so the
// block meets at one barrier.
// `split` warps share a row (rowSplit): lane l of the row's warp p takes every (32·split)-th
// 16-byte vector from (32·p + l), in ascending k; the warps' sums are added in warp order. The
// grouping depends only on (IC, OC) and the weights' type, so a layer gives the same floats on every
// call. A block takes its rows (8 / split at a time) every gridDim.x blocks, so a long product (the
// lm head) normalises its row once per block, not once per 4 rows. The first batch of each row's
// weights is loaded before the previous row is summed (the first row's before waiting for the
// kernel that writes x).
template <class Then, class Row = RowAsIs, class W = float>
__global__ void __launch_bounds__(kRowWarpsPerBlock * 32)
    linearRow(float* y, const W* wT, const float* x, const float* bias, int IC, int OC, int split, Then then,
              Row row = {}) {
  constexpr bool kNormalised = std::is_same_v<Row, RowNormalised>;
  __shared__ float warpSums[kRowWarpsPerBlock];
  startDependents();
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int rowsPerBlock = kRowWarpsPerBlock / split, rowStep = static_cast<int>(gridDim.x) * rowsPerBlock;
  const int start = (warp % split) * 32 + lane, stride = 32 * split;
  constexpr int kPerVector = static_cast<int>(16 / sizeof(W));
  bool vectors = IC % kPerVector == 0 && onVectors(wT) && onVectors(x);  // then every row starts on 16 bytes
  if constexpr (kNormalised) vectors = vectors && onVectors(row.weight) && onVectors(row.bias);
  const int nv = IC / kPerVector;
  int o = static_cast<int>(blockIdx.x) * rowsPerBlock + warp / split;
  const uint4* wv = nullptr;
  uint4 a[kRowLoadsInFlight];
  const auto load = [&](int first) {
#pragma unroll
    for (int u = 0; u < kRowLoadsInFlight; ++u)
      if (first + stride * u < nv) a[u] = __ldcs(wv + first + stride * u);  // streamed: read once a token
  };
  const auto loadRow = [&](int r) {  // row r's first batch
    wv = reinterpret_cast<const uint4*>(wT + static_cast<osprey::Index>(r) * IC);
    if (vectors) load(start);
  };
  if (o < OC) loadRow(o);
  float biasValue = o < OC && bias ? bias[o] : 0.0f;
  // The LayerNorm's weight and bias for the group of four this warp writes (rows of up to
  // 32·kHeldGroups groups; other rows read them where they are used).
  float4 normWeight{}, normBias{};
  const int group = lane + 32 * warp;
  if constexpr (kNormalised) {
    if (vectors && group < IC / 4) {
      normWeight = reinterpret_cast<const float4*>(row.weight)[group];
      normBias = reinterpret_cast<const float4*>(row.bias)[group];
    }
  }
  awaitEarlierKernels();

  if constexpr (kNormalised) {
    extern __shared__ float4 normalisedRow[];
    float* xs = reinterpret_cast<float*>(normalisedRow);
    HeldRow<> held;
    const float2 statistics = rowStatistics(x, IC, row.eps, held);
    const float m = statistics.x, s = statistics.y;
    const auto normalised = [&](float v, float w, float b) { return ((v - m) * s) * w + b; };
    static_assert(kHeldGroups <= kRowWarpsPerBlock, "a row held in registers is written by one warp a group");
    if (held.inRegisters && vectors) {
#pragma unroll
      for (int j = 0; j < kHeldGroups; ++j)
        if (j == warp && group < IC / 4) {  // a constant index: held stays in registers
          const float4 v = held.held[j];
          normalisedRow[group] = {normalised(v.x, normWeight.x, normBias.x), normalised(v.y, normWeight.y, normBias.y),
                                  normalised(v.z, normWeight.z, normBias.z), normalised(v.w, normWeight.w, normBias.w)};
        }
    } else {
      for (int c = static_cast<int>(threadIdx.x); c < IC; c += static_cast<int>(blockDim.x))
        xs[c] = normalised(x[c], row.weight[c], row.bias[c]);
    }
    __syncthreads();
    x = xs;
  }
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const auto xAt = [&](int f) { return x4[f]; };
  for (int first = static_cast<int>(blockIdx.x) * rowsPerBlock; first < OC; first += rowStep, o += rowStep) {
    const bool writes = o < OC && lane == 0 && warp % split == 0;  // the lane that writes y[o]
    const float operand = writes ? then.operand(o) : 0.0f;
    float acc = 0.0f;
    if (o < OC) {
      if (vectors) {
        for (int f = start; f < nv; f += stride * kRowLoadsInFlight) {
          if (f != start) load(f);
#pragma unroll
          for (int u = 0; u < kRowLoadsInFlight; ++u)
            if (f + stride * u < nv) acc += vectorDot<W>(a[u], xAt, f + stride * u);
        }
      } else {
        const W* w = wT + static_cast<osprey::Index>(o) * IC;
        for (int k = start; k < IC; k += stride) acc += widened(w[k]) * x[k];
      }
    }
    const float rowBias = biasValue;
    const bool more = first + rowStep < OC;
    if (more && o + rowStep < OC) {
      loadRow(o + rowStep);
      biasValue = bias ? bias[o + rowStep] : 0.0f;
    }
    acc = warpSum(acc);
    if (split == 1) {
      if (writes) y[o] = then(o, bias ? acc + rowBias : acc, operand);
      continue;
    }
    if (lane == 0) warpSums[warp] = acc;
    __syncthreads();
    if (writes) {
      float total = warpSums[warp];
      for (int p = 1; p < split; ++p) total += warpSums[warp + p];
      y[o] = then(o, bias ? total + rowBias : total, operand);
    }
    if (more) __syncthreads();  // warpSums is written again
  }
  if constexpr (requires { then.finishBlock(); }) then.finishBlock();  // ArgmaxThen
}

// One query (qkvRow's q, NH heads of hs) against Tc cached keys and values (Tc, C): a block per
// head. pre[t2] = q·k[t2] / sqrt(hs); att = softmax(pre); out[hh·hs + d] = Σ att[t2]·v[t2][hh·hs + d].
// A recorded decoding step (fast/decode_graph.hpp) reads the position from the device instead
// (`position`: Tc = *position + 1) and first writes the new position's key and value, qkvRow's
// columns [C, 2C) and [2C, 3C), into row Tc - 1 of the cache, which has room for it (`append`);
// each block writes and reads only its own head's columns.
// In one pass (the online softmax): the block's threads form groups of Lanes lanes, each group
// taking positions g, g + G, ... (two at a time, so that their sums overlap), each lane holding
// channels sub + Lanes·i of q and of its running output; a position's score is a sum over the
// group's lanes. The groups' running maxima, normalisers and outputs are then merged, in group
// order. Decoding is a chain of small kernels, so this one is short: no pass over the scores to
// find their maximum first, and many positions under way at once.
// Lanes × PerLane covers the head: 8 × 8 for GPT-2's 64 channels (4 positions a warp at once),
// 32 × kDecodeMaxPerLane for any head up to 256 wide.
constexpr int kDecodeWarps = 16;
constexpr int kDecodeMaxPerLane = 8;  // heads up to 256 wide
template <int Lanes, int PerLane>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    attendOneRow(float* out, const float* qkvRow, float* keys, float* values, int Tc, int C, int hs, float scale,
                 const int* position = nullptr, bool append = false) {
  constexpr int kThreads = kDecodeWarps * 32, kGroups = kThreads / Lanes, kPerWarp = 32 / Lanes;
  __shared__ float runningMax[kGroups], normaliser[kGroups];
  __shared__ float partial[kThreads * PerLane];  // (group, channel), hs channels a group
  __shared__ float mergedTotal[kThreads], mergedSum[kThreads];
  startDependents();
  if (position) Tc = *position + 1;  // written by the previous replay, which has finished
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int sub = lane % Lanes, group = tid / Lanes, head = static_cast<int>(blockIdx.x) * hs;
  const auto channel = [&](const float* row, int i) { return sub + Lanes * i < hs ? row[sub + Lanes * i] : 0.0f; };
  // One round: this lane's channels of the keys and values at positions t and u = t + kGroups.
  float k0[PerLane], k1[PerLane], v0[PerLane], v1[PerLane];
  const auto rowAt = [&](int t) { return static_cast<osprey::Index>(t < Tc ? t : 0) * C + head; };
  const auto loadKeys = [&](int t, int u) {
#pragma unroll
    for (int i = 0; i < PerLane; ++i) {
      k0[i] = channel(keys + rowAt(t), i);
      k1[i] = channel(keys + rowAt(u), i);
    }
  };
  const auto loadValues = [&](int t, int u) {
#pragma unroll
    for (int i = 0; i < PerLane; ++i) {
      v0[i] = channel(values + rowAt(t), i);
      v1[i] = channel(values + rowAt(u), i);
    }
  };
  const auto loadRound = [&](int t, int u) {
    loadKeys(t, u);
    loadValues(t, u);
  };
  // Rounds are counted per warp, so that every lane of a warp takes part in every group sum.
  const int firstRound = warp * kPerWarp, firstT = firstRound + group % kPerWarp;
  // Appending, every position before the new one was written by an earlier step, which has
  // finished: the first round's keys and values load before the wait, all but the new row's.
  if (append) loadRound(firstT, firstT + kGroups);
  awaitEarlierKernels();
  float q[PerLane], acc[PerLane];
#pragma unroll
  for (int i = 0; i < PerLane; ++i) {
    const int d = sub + Lanes * i;
    q[i] = d < hs ? qkvRow[head + d] : 0.0f;
    acc[i] = 0.0f;
  }
  if (append) {
    const osprey::Index at = static_cast<osprey::Index>(Tc - 1) * C + head;
    for (int d = tid; d < hs; d += kThreads) {
      keys[at + d] = qkvRow[C + head + d];
      values[at + d] = qkvRow[2 * C + head + d];
    }
    __syncthreads();  // the new row, visible to every warp of the block
    if (firstT == Tc - 1 || firstT + kGroups == Tc - 1) loadRound(firstT, firstT + kGroups);
  }
  float m = -INFINITY, l = 0.0f;
  if (!append) loadRound(firstT, firstT + kGroups);
  for (int first = firstRound; first < Tc; first += 2 * kGroups) {
    const int t = first + group % kPerWarp, u = t + kGroups;
    const bool one = t < Tc, two = u < Tc, more = first + 2 * kGroups < Tc;
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int i = 0; i < PerLane; ++i) {
      s0 += q[i] * k0[i];
      s1 += q[i] * k1[i];
    }
    // The next round's keys load as soon as this round's are used, and its values once this
    // round's are: each wait overlaps this round's sums and softmax.
    if (more) loadKeys(t + 2 * kGroups, u + 2 * kGroups);
    s0 = groupSum<Lanes>(s0) * scale;
    s1 = groupSum<Lanes>(s1) * scale;
    if (one) {
      const float mNew = two ? fmaxf(m, fmaxf(s0, s1)) : fmaxf(m, s0);
      const float kept = __expf(m - mNew), p0 = __expf(s0 - mNew), p1 = two ? __expf(s1 - mNew) : 0.0f;
      l = (l * kept + p0) + p1;
#pragma unroll
      for (int i = 0; i < PerLane; ++i) acc[i] = (acc[i] * kept + p0 * v0[i]) + p1 * v1[i];
      m = mNew;
    }
    if (more) loadValues(t + 2 * kGroups, u + 2 * kGroups);
  }
  if (sub == 0) {
    runningMax[group] = m;
    normaliser[group] = l;
  }
#pragma unroll
  for (int i = 0; i < PerLane; ++i)
    if (sub + Lanes * i < hs) partial[group * hs + sub + Lanes * i] = acc[i];
  __syncthreads();
  // Merged in two steps: slice s of channel d adds groups s, s + slices, ...; then channel d adds
  // its slices. A group without positions holds -inf and zeros, so its weight is 0.
  float top = -INFINITY;
#pragma unroll
  for (int g = lane; g < kGroups; g += 32) top = fmaxf(top, runningMax[g]);
  top = warpMax(top);
  const int slices = kThreads / hs, d = tid % hs, slice = tid / hs;
  if (slice < slices) {
    float total = 0.0f, sum = 0.0f;
#pragma unroll 8
    for (int g = slice; g < kGroups; g += slices) {
      const float weight = __expf(runningMax[g] - top);
      total += partial[g * hs + d] * weight;
      sum += normaliser[g] * weight;
    }
    mergedTotal[tid] = total;
    mergedSum[tid] = sum;
  }
  __syncthreads();
  if (tid < hs) {
    float total = 0.0f, sum = 0.0f;
    for (int p = 0; p < slices; ++p) {
      total += mergedTotal[p * hs + tid];
      sum += mergedSum[p * hs + tid];
    }
    out[head + tid] = total / sum;
  }
}

// The smallest index of the largest non-NaN value of x (n), as a float (exact below 2^24), or -1
// when every value is NaN. kArgmaxBlocks blocks each find their slice's best, and the last of them
// to finish picks the best of those (gridMaximum). Choosing a recorded continuation's first token,
// it also writes the token for the host and moves the position on (noteToken); the replays' own
// choice is ArgmaxThen's, in the lm head.
constexpr int kArgmaxThreads = 512;
constexpr int kArgmaxBlocks = 64;
// Where the blocks of a grid leave their best (value, index), one slot a block, and the ticket
// that finds the last of them: laid out in one allocation of 2·slots + 1 ints (candidatesIn), the
// ticket zero before a launch and left zero after it.
struct Candidates {
  float* values;
  int* indices;
  unsigned* finished;
};
inline Candidates candidatesIn(int* room, int slots) {
  return {reinterpret_cast<float*>(room), room + slots, reinterpret_cast<unsigned*>(room + 2 * slots)};
}
// Whether (v, j) is a better answer than (best, at): j a real index and v not NaN, and nothing yet
// (at < 0), a larger value, or an equal one earlier.
__device__ __forceinline__ bool betterMaximum(float v, int j, float best, int at) {
  return j >= 0 && v == v && (at < 0 || v > best || (v == best && j < at));
}
// The best of (best, at) over a warp, in every lane: the butterfly pairs lanes, and any order of
// picking gives the same answer.
__device__ __forceinline__ void warpMaximum(float& best, int& at) {
  for (int o = 16; o > 0; o /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const int j = __shfl_xor_sync(0xffffffffu, at, o);
    if (betterMaximum(v, j, best, at)) {
      best = v;
      at = j;
    }
  }
}
// The block's best (value, index), in its first warp; Threads: the block's size.
template <int Threads = kArgmaxThreads>
__device__ void blockMaximum(float& best, int& at) {
  constexpr int kWarps = Threads / 32;
  __shared__ float warpBest[kWarps];
  __shared__ int warpAt[kWarps];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  warpMaximum(best, at);
  if (lane == 0) {
    warpBest[warp] = best;
    warpAt[warp] = at;
  }
  __syncthreads();
  best = lane < kWarps ? warpBest[lane] : -INFINITY;
  at = lane < kWarps ? warpAt[lane] : -1;
  warpMaximum(best, at);
}
// The grid's best (value, index), from every thread's (best, at): each block leaves its best in
// `c`, and the last block to finish (the ticket) picks the best of those, returning true with the
// answer in its first warp; every other block returns false. The answer is the same whichever
// block finishes last: (value descending, index ascending) orders the candidates totally.
template <int Threads>
__device__ bool gridMaximum(float& best, int& at, Candidates c) {
  __shared__ bool last;
  const int tid = static_cast<int>(threadIdx.x);
  blockMaximum<Threads>(best, at);
  if (tid == 0) {
    c.values[blockIdx.x] = best;
    c.indices[blockIdx.x] = at;
    __threadfence();  // the candidate, visible before the ticket
    last = atomicAdd(c.finished, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return false;
  __threadfence();  // every block's candidate, read after its ticket
  best = -INFINITY;
  at = -1;
  for (int i = tid; i < static_cast<int>(gridDim.x); i += Threads) {
    const float v = __ldcg(&c.values[i]);
    const int j = __ldcg(&c.indices[i]);
    if (betterMaximum(v, j, best, at)) {
      best = v;
      at = j;
    }
  }
  blockMaximum<Threads>(best, at);
  if (tid == 0) *c.finished = 0;
  return true;
}
// A recorded continuation's token `at`, chosen at *position: into the host's slot for that
// position (mapped pinned memory: no copy to wait for), and the position moved on. Returns it.
__device__ __forceinline__ int noteToken(int at, int* position, int* byPosition) {
  const int p = *position;
  byPosition[p] = at;
  *position = p + 1;
  return p + 1;
}
__global__ void __launch_bounds__(kArgmaxThreads)
    argmaxKernel(float* result, const float* x, int n, Candidates candidates, int* position = nullptr,
                 int* byPosition = nullptr) {
  startDependents();
  awaitEarlierKernels();
  const int tid = static_cast<int>(threadIdx.x), block = static_cast<int>(blockIdx.x);
  float best = -INFINITY;
  int at = -1;
#pragma unroll 4
  for (int i = block * kArgmaxThreads + tid; i < n; i += kArgmaxBlocks * kArgmaxThreads) {
    const float v = x[i];
    if (betterMaximum(v, i, best, at)) {  // ascending i: the first of equal values stays
      best = v;
      at = i;
    }
  }
  if (!gridMaximum<kArgmaxThreads>(best, at, candidates) || tid != 0) return;
  *result = static_cast<float>(at);
  if (position) noteToken(at, position, byPosition);
}

// The lm head of a recorded decoding step with the greedy choice in its own kernel (linearRow's
// `then`): argmaxKernel's answer without a kernel of its own, and the next step's embedding
// written by the kernel that chooses its token, so that a replayed step starts with its first
// block. Each writing lane keeps the best of the logits it writes, and gridMaximum picks from
// those (`candidates`: a slot for each of up to kMaxHeadBlocksPerMultiprocessor blocks a
// multiprocessor), as argmaxKernel does: the same token. The last block then notes the token
// (noteToken) and writes embedding (C) = wte[token] + wpe[position + 1], embedOne's sum (NaNs past
// the context, or for no token: all logits NaN, which the host reports).
constexpr int kMaxHeadBlocksPerMultiprocessor = 8;  // 2048 threads over 256-thread blocks
struct NextToken {
  Candidates candidates;
  int* position;
  int* byPosition;
  float* embedding;
  const float* wte;
  const float* wpe;
  int C, V, maxT;
};
struct ArgmaxThen {
  NextToken next;
  float best = -INFINITY;
  int at = -1;
  __device__ float operand(int) const { return 0.0f; }
  __device__ float operator()(int o, float y, float) {
    if (betterMaximum(y, o, best, at)) {  // a lane's rows ascend: the first of equal values stays
      best = y;
      at = o;
    }
    return y;
  }
  __device__ void finishBlock() {
    constexpr int kThreads = kRowWarpsPerBlock * 32;
    __shared__ int chosen, nextPosition;
    const int tid = static_cast<int>(threadIdx.x);
    if (!gridMaximum<kThreads>(best, at, next.candidates)) return;
    if (tid == 0) {
      chosen = at;
      nextPosition = noteToken(at, next.position, next.byPosition);
    }
    __syncthreads();
    const bool real = chosen >= 0 && chosen < next.V && nextPosition < next.maxT;
    for (int c = tid; c < next.C; c += kThreads)
      next.embedding[c] = real ? next.wte[static_cast<osprey::Index>(chosen) * next.C + c] +
                                     next.wpe[static_cast<osprey::Index>(nextPosition) * next.C + c]
                               : NAN;
  }
};

// *at = value, queued with the kernels around it.
__global__ void storeInt(int* at, int value) { *at = value; }

// out (C) = wte[token] + wpe[position], the encoder for one new token whose id (a float) and
// position are on the device: a recorded continuation's first token (the replays' come from
// ArgmaxThen). The same sum as the reference encoder's (a float sum rounded once). An id outside
// [0, V), which only an argmax that found no maximum leaves, gives NaNs; the host reports that
// argmax's failure before any replay is read.
__global__ void embedOne(float* out, const float* token, const float* wte, const float* wpe, const int* position,
                         int C, int V) {
  startDependents();
  awaitEarlierKernels();
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  const float id = *token;
  if (!(id >= 0.0f && id < static_cast<float>(V))) {
    out[c] = NAN;
    return;
  }
  out[c] = wte[static_cast<osprey::Index>(id) * C + c] + wpe[static_cast<osprey::Index>(*position) * C + c];
}

}  // namespace

using osprey::cuda_detail::launchOverlapped;
}  // namespace gpt2::fast_kernels
