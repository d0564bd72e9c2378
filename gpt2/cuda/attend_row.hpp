// One decoded position's attention in one launch, for the recorded decoding step
// (gpt2/cuda/recorded_cuda.hpp answers attendAppending with it). The reference takes five launches
// there, each a wait between dependent kernels: the append of the new key and value, and
// detail::attendCached's four row folds (the scores, their maxima, the sums of exp, the output).
// Here one block takes one head and does all of it, its chains over channels and positions on the
// FP64 tensor cores (osprey/gpu/cuda/kernels/row_dmma.hpp: an mma chained through its accumulator
// is the ascending fma chain, bit for bit, in fewer cycles a term):
//   * before its wait for the kernels before it, the head's earlier keys and values are sent toward
//     the L2, and each warp loads the keys of its first 16 positions (those before the position the
//     position held then: in a replay, this step's) into registers; then the head's channels of the
//     new key and value are written at *position (appendAtPosition's doubles), q's and the key's
//     into shared memory;
//   * each warp takes 16 positions t2 <= *position at a time: pre[t2] = scale(fma chain of q · k
//     over the head's channels, from +0.0, channel ascending) as one mma chain, the keys as A's
//     rows, into shared memory; the first 16 from the keys loaded before the wait, the new key put
//     in from shared memory, where the position was the one they were loaded for (otherwise loaded
//     again);
//   * warp 0 finds the maximum, the fold of Larger from pre[0] (the earlier of equal values is
//     kept; chains::warpFirstLargest says why any order gives its value); the threads write
//     e[t2] = exp(pre[t2] - max); warp 0 sums them from 0.0, t2 ascending (the chain
//     fma(e, 1, acc)); the threads write att[t2] = e[t2] / sum;
//   * warp w runs out[c] = fma chain of att[t2] · v[t2][c] from +0.0, t2 ascending, for its 16
//     channels c as one mma chain, the values read from the L2 a few steps ahead.
// These are the reference's terms (the same functions: osprey::math::exp, the scale's DivideBy,
// the folds' combines) combined in the reference's order, so the same doubles;
// tests/cuda/recorded_decoding_test.cu compares them bit for bit.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/attend_row.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>

#include <fmt/format.h>

#include "gpt2/cuda/chains.hpp"
#include "gpt2/layers/attention.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/kernels/dependent_launch.hpp"
#include "osprey/gpu/cuda/kernels/row_dmma.hpp"
#include "osprey/math.hpp"

namespace gpt2::attend_row {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kThreads = 256;
constexpr int kMostHeadSize = 128;          // lanes of the output chains (GPT-2's heads are 64)
constexpr int kCompiledHeadSize = 64;       // the head size compiled as a constant (GPT-2's)
constexpr long long kMostPositions = 4096;  // the score row in shared memory: 32 KiB, no opt-in

__host__ __device__ inline long long sharedBytes(long long maxT) {
  return (maxT + 2 * kMostHeadSize) * static_cast<long long>(sizeof(double));
}
// Whether a recording's context and head size fit the kernel (every GPT-2 size's do).
inline bool fits(long long maxT, long long hs) {
  return maxT >= 1 && maxT <= kMostPositions && hs >= 1 && hs <= kMostHeadSize && osprey::cuda_detail::dmmaCompiled();
}

__device__ __forceinline__ void prefetchToL2(const double* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

constexpr int kStepsAhead = 4;  // mma steps whose keys or values are loaded a group ahead (dmmaGroups)

// A's operands of a score group's steps (osprey/gpu/cuda/kernels/row_dmma.hpp's loadA), on lane
// g * 4 + t: for step, channel step * K + t + 4 j of key rows key0 (A's row g) and key1 (row g + 8),
// +0.0 past the head's channels; first() loads the first kStepsAhead steps.
struct KeyFragments {
  const double *key0, *key1;
  int hs;
  __device__ __forceinline__ void operator()(int step, double (&a)[8]) const {
    const int t = static_cast<int>(threadIdx.x % 4);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = step * osprey::cuda_detail::kDmmaK + t + 4 * j;
      a[2 * j] = c < hs ? key0[c] : 0.0;
      a[2 * j + 1] = c < hs ? key1[c] : 0.0;
    }
  }
  __device__ __forceinline__ void first(double (&a)[kStepsAhead][8]) const {
#pragma unroll
    for (int step = 0; step < kStepsAhead; ++step) (*this)(step, a[step]);
  }
};
// The keys of positions p0 + g and p0 + g + 8, each past `last` reading key `last`.
__device__ __forceinline__ KeyFragments keysOf(const double* keys, long long C, long long head, int hs, int p0,
                                               int last) {
  const int g = static_cast<int>(threadIdx.x % 32) / 4;
  const auto rowOf = [&](int pos) { return keys + static_cast<long long>(pos < last ? pos : last) * C + head; };
  return KeyFragments{rowOf(p0 + g), rowOf(p0 + g + 8), hs};
}

// Scores of positions p0 .. p0 + 15 (those below P) on the calling warp, into row: each the
// reference's chain fma(q[c], key[c], acc) from +0.0 over the head's channels c ascending, then its
// scale, as one mma chain (osprey/gpu/cuda/kernels/row_dmma.hpp): the 16 keys as A's rows, q as
// every column of B. q holds -0.0 past the head's channels (against the keys' +0.0 there: no change
// to any chain); rows past P read key P - 1 (load: keysOf(..., P - 1)) and are not stored. `first`
// holds the first steps' keys, loaded by the caller.
template <class Scale>
__device__ __forceinline__ void scoreGroupFrom(double (&first)[kStepsAhead][8], const KeyFragments& load, double* row,
                                               const double* q, int hs, int P, int p0, Scale scale) {
  constexpr int K = osprey::cuda_detail::kDmmaK;
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  double d[4] = {0.0, 0.0, 0.0, 0.0};
  osprey::cuda_detail::dmmaGroupsFrom<kStepsAhead>(d, (hs + K - 1) / K, first, load, [&](int step, double (&b)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = q[step * K + t + 4 * j];
  });
  if (t == 0 && p0 + g < P) row[p0 + g] = scale(d[0]);
  if (t == 0 && p0 + g + 8 < P) row[p0 + g + 8] = scale(d[2]);
}
template <class Scale>
__device__ __forceinline__ void scoreGroup(double* row, const double* q, const double* keys, long long C,
                                           long long head, int hs, int P, int p0, Scale scale) {
  const KeyFragments load = keysOf(keys, C, head, hs, p0, P - 1);
  double first[kStepsAhead][8];
  load.first(first);
  scoreGroupFrom(first, load, row, q, hs, P, p0, scale);
}

// Channels c0 .. c0 + 15 (those below hs) of the output on the calling warp: each the reference's
// chain fma(att[p], value[p][c], acc) from +0.0 over positions p ascending, as one mma chain: the 16
// channels as A's rows (the values), att as every column of B (-0.0 past P, against the values'
// +0.0 there).
__device__ __forceinline__ void outputGroup(double* out, const double* att, const double* values, long long C,
                                            long long head, int hs, int P, int c0) {
  constexpr int K = osprey::cuda_detail::kDmmaK;
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const int ca = c0 + g, cb = c0 + g + 8;
  const double* va = values + head + (ca < hs ? ca : hs - 1);
  const double* vb = values + head + (cb < hs ? cb : hs - 1);
  double d[4] = {0.0, 0.0, 0.0, 0.0};
  osprey::cuda_detail::dmmaGroups<kStepsAhead>(
      d, (P + K - 1) / K,
      [&](int step, double (&a)[8]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int p = step * K + t + 4 * j;
          a[2 * j] = p < P ? va[static_cast<long long>(p) * C] : 0.0;
          a[2 * j + 1] = p < P ? vb[static_cast<long long>(p) * C] : 0.0;
        }
      },
      [&](int step, double (&b)[4]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int p = step * K + t + 4 * j;
          b[j] = p < P ? att[p] : -0.0;
        }
      });
  if (t == 0 && ca < hs) out[head + ca] = d[0];
  if (t == 0 && cb < hs) out[head + cb] = d[2];
}

// Row *position of keys and values (maxT, C) grows by the new position's key and value (columns
// [C, 2C) and [2C, 3C) of qkv), and out (C) is that position's attention over positions 0 ..
// *position. Block hh takes head hh. Heads of Hs channels (GPT-2's 64) are compiled for that size:
// the chains' channel bounds known, so no lane tests them; Hs = 0 takes the size given.
template <int Hs, class Scale>
__global__ void __launch_bounds__(kThreads)
    attendRow(double* __restrict__ out, double* __restrict__ keys, double* __restrict__ values,
              const double* __restrict__ qkv, const int* __restrict__ position, int maxT, int C, int hsGiven,
              Scale scale) {
  const int hs = Hs > 0 ? Hs : hsGiven;
  extern __shared__ __align__(16) double held[];  // q and the new key (kMostHeadSize each), the head's row of maxT
  __shared__ double stats[2];
  double* q = held;
  double* newKeyHeld = held + kMostHeadSize;
  double* row = held + 2 * kMostHeadSize;
  const int t = static_cast<int>(threadIdx.x), warp = t / 32;
  const long long head = static_cast<long long>(blockIdx.x) * hs;
  // Position p's row of this head in a cache room (maxT, C).
  const auto rowOf = [&](double* room, int p) { return room + static_cast<long long>(p) * C + head; };
  osprey::cuda_detail::BlockTrace trace;
  trace.open(t == 0);
  osprey::cuda_detail::startDependents();  // the projection after it may stage its weights
  // Before the wait: the head's keys and values at the positions before this one (earlier steps
  // wrote them, no kernel of this step does) go toward the L2, a 128-byte line at a time, so that
  // the chains below read the L2 rather than the memory. The position is only a hint here, read
  // past the L1 (ld.global.cg): in a replay it is this step's (the previous step's choice finished
  // before this step began); a stale one would only send other rows of the room.
  const int before = __ldcg(position);
  const bool earlierRows = before > 0 && before < maxT;
  if (earlierRows)
    for (double* room : {keys, values})
      for (int e = t * 16; e < before * hs; e += kThreads * 16) prefetchToL2(rowOf(room, e / hs) + e % hs);
  // The warp's first group of scores has its earlier positions' keys loaded before the wait too (in
  // registers, their round trip behind the wait); used only where the hint was the position.
  const int firstP0 = warp * osprey::cuda_detail::kDmmaK;
  const bool hinted = earlierRows && firstP0 <= before;
  double early[kStepsAhead][8];
  if (hinted) keysOf(keys, C, head, hs, firstP0, before - 1).first(early);
  osprey::cuda_detail::awaitEarlierKernels();  // the position, qkv and the cache are earlier kernels'
  trace.mark<1>();
  const int at = *position;
  if (at < 0 || at >= maxT) return;  // never replayed (recorded_cuda.hpp queues no step past the context)
  const int P = at + 1;
  double *newKey = rowOf(keys, at), *newValue = rowOf(values, at);
  for (int d = t; d < kMostHeadSize; d += kThreads) {
    if (d < hs) {
      const double k = qkv[C + head + d], v = qkv[2LL * C + head + d];
      newKey[d] = k;
      newValue[d] = v;
      newKeyHeld[d] = k;
    }
    q[d] = d < hs ? qkv[head + d] : -0.0;  // past the head: no term (scoreGroup)
  }
  __syncthreads();  // the new key and value and q are written (the block's writes are visible to it)
  trace.mark<2>();

  // The scores: the reference's dot fold over the head's channels, then its finish (the scale).
  int p0 = firstP0;
  if (hinted && at == before && p0 < P) {
    // The early keys of positions at and past it (rows past P read key P - 1 = at) are the new key's.
    const int lane = t % 32, g = lane / 4;
#pragma unroll
    for (int step = 0; step < kStepsAhead; ++step)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = step * osprey::cuda_detail::kDmmaK + lane % 4 + 4 * j;
        const double k = c < hs ? newKeyHeld[c] : 0.0;
        if (p0 + g >= at) early[step][2 * j] = k;
        if (p0 + g + 8 >= at) early[step][2 * j + 1] = k;
      }
    scoreGroupFrom(early, keysOf(keys, C, head, hs, p0, P - 1), row, q, hs, P, p0, scale);
    p0 += kThreads / 32 * osprey::cuda_detail::kDmmaK;
  }
  for (; p0 < P; p0 += kThreads / 32 * osprey::cuda_detail::kDmmaK) scoreGroup(row, q, keys, C, head, hs, P, p0, scale);
  __syncthreads();
  trace.mark<3>();
  if (warp == 0) {  // the maximum: the fold of Larger from the first score, found by one warp
    const double m = chains::warpFirstLargest(row, P);
    if (t == 0) stats[0] = m;
  }
  __syncthreads();
  const double m = stats[0];
  for (int t2 = t; t2 < P; t2 += kThreads) row[t2] = osprey::math::exp(row[t2] - m);
  __syncthreads();
  // The sum of exp(pre - max) from 0.0, t2 ascending: the chain fma(e, 1, acc), which rounds acc + e
  // once, as the reference's addition does.
  if (warp == 0) {
    const double sum = osprey::cuda_detail::warpSum(row, P, 0.0);
    if (t == 0) stats[1] = sum;
  }
  __syncthreads();
  const double s = stats[1];
  for (int t2 = t; t2 < P; t2 += kThreads) row[t2] = row[t2] / s;
  __syncthreads();
  trace.mark<4>();

  // The output: warp w's 16 channels from 16 w, each a chain over the positions.
  if (const int c0 = warp * osprey::cuda_detail::kDmmaK; c0 < hs) outputGroup(out, row, values, C, head, hs, P, c0);
  trace.mark<5>();
  trace.close(osprey::cuda_detail::kTraceAttention, keys);
}

}  // namespace

// The new position's attention for the recorded step on handler H (a GpuCuda): row *position of
// keyRoom and valueRoom (maxT, C) written from qkvRow (3C), then out (C) over positions 0 ..
// *position, in one launch. The caller has checked fits(maxT, C / NH); the lengths are checked here.
template <class H>
osprey::Result<Buf<H>> attendAppendingOneRow(H& h, const Buf<H>& qkvRow, const Buf<H>& keyRoom, const Buf<H>& valueRoom,
                                             const int* position, osprey::Index maxT, osprey::Index C,
                                             osprey::Index NH) {
  const char* L = "attention, one row";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  if (!fits(maxT, hs))
    return osprey::Error{fmt::format("{}: a context of {} and heads of {} do not fit the kernel (at most {} and {})", L,
                                     maxT, hs, kMostPositions, kMostHeadSize)};
  OSPREY_CHECK(checkLength(h, qkvRow, 3 * C, L, "qkv row"));
  const osprey::Index room = OSPREY_TRY(checkedProduct(L, {maxT, C}));
  OSPREY_CHECK(checkLength(h, keyRoom, room, L, "key cache"));
  OSPREY_CHECK(checkLength(h, valueRoom, room, L, "value cache"));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> out = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, C));
  const osprey::math::DivideBy bySqrtHs(osprey::math::sqrt(static_cast<osprey::Scalar>(hs)));
  OSPREY_CHECK(device->launchOwn(L, [&](cudaStream_t stream) {
    return osprey::cuda_detail::launchOverlapped(
        dim3(static_cast<unsigned>(NH)), dim3(kThreads), static_cast<std::size_t>(sharedBytes(maxT)), stream,
        hs == kCompiledHeadSize ? attendRow<kCompiledHeadSize, osprey::math::DivideBy>
                                : attendRow<0, osprey::math::DivideBy>,
        out.data(), keyRoom.data(), valueRoom.data(), qkvRow.data(), position,
        static_cast<int>(maxT), static_cast<int>(C), static_cast<int>(hs), bySqrtHs);
  }));
  return out;
}

}  // namespace gpt2::attend_row
