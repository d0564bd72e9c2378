// One decoded position's attention in one launch, for the recorded decoding step
// (gpt2/cuda/recorded_cuda.hpp answers attendAppending with it). The reference takes five launches
// there, each a wait between dependent kernels: the append of the new key and value, and
// detail::attendCached's four row folds (the scores, their maxima, the sums of exp, the output).
// Here one block takes one head and does all of it, the block's threads computing terms and one
// thread running each fold that is a single chain:
//   * the head's channels of the new key and value are written at *position (appendAtPosition's
//     doubles), q's into shared memory, and V's rows are sent toward L2 for the last phase;
//   * every thread takes positions t2 <= *position: pre[t2] = scale(fma chain of q · k over the
//     head's channels, from +0.0, channel ascending) into shared memory;
//   * thread 0 folds the maximum from pre[0] (Larger: the earlier of equal values is kept); the
//     threads write e[t2] = exp(pre[t2] - max); thread 0 sums them from 0.0, t2 ascending; the
//     threads write att[t2] = e[t2] / sum;
//   * lanes c < hs run out[c] = fma chain of att[t2] · v[t2][c] from +0.0, t2 ascending, the next
//     group of values loaded while the current group's fmas run.
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
#include "osprey/math.hpp"

namespace gpt2::attend_row {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kThreads = 256;
constexpr int kMostHeadSize = 128;          // lanes of the output chains (GPT-2's heads are 64)
constexpr long long kMostPositions = 4096;  // the score row in shared memory: 32 KiB, no opt-in
constexpr int kValuesAhead = 16;            // positions of V a lane holds in registers, per group

__host__ __device__ inline long long sharedBytes(long long maxT) {
  return (maxT + kMostHeadSize) * static_cast<long long>(sizeof(double));
}
// Whether a recording's context and head size fit the kernel (every GPT-2 size's do).
inline bool fits(long long maxT, long long hs) {
  return maxT >= 1 && maxT <= kMostPositions && hs >= 1 && hs <= kMostHeadSize;
}

__device__ __forceinline__ void prefetchToL2(const double* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Row *position of keys and values (maxT, C) grows by the new position's key and value (columns
// [C, 2C) and [2C, 3C) of qkv), and out (C) is that position's attention over positions 0 ..
// *position. Block hh takes head hh.
template <class Scale>
__global__ void __launch_bounds__(kThreads)
    attendRow(double* __restrict__ out, double* __restrict__ keys, double* __restrict__ values,
              const double* __restrict__ qkv, const int* __restrict__ position, int maxT, int C, int hs, Scale scale) {
  extern __shared__ __align__(16) double held[];  // q (kMostHeadSize), then the head's row of maxT
  __shared__ double stats[2];
  double* q = held;
  double* row = held + kMostHeadSize;
  const int t = static_cast<int>(threadIdx.x);
  osprey::cuda_detail::startDependents();      // the projection after it may stage its weights
  osprey::cuda_detail::awaitEarlierKernels();  // the position, qkv and the cache are earlier kernels'
  const int at = *position;
  if (at < 0 || at >= maxT) return;  // never replayed (recorded_cuda.hpp queues no step past the context)
  const int P = at + 1;
  const long long head = static_cast<long long>(blockIdx.x) * hs;
  const long long newRow = static_cast<long long>(at) * C + head;
  for (int d = t; d < hs; d += kThreads) {
    const double k = qkv[C + head + d], v = qkv[2LL * C + head + d];
    keys[newRow + d] = k;
    values[newRow + d] = v;
    q[d] = qkv[head + d];
  }
  // V's rows of this head, a 128-byte line at a time, for the output chains at the end.
  for (long long e = static_cast<long long>(t) * 16; e < static_cast<long long>(P) * hs; e += kThreads * 16LL)
    prefetchToL2(values + (e / hs) * C + head + e % hs);
  __syncthreads();  // the new key and value and q are written (the block's writes are visible to it)

  // The scores: the reference's dot fold over the head's channels, then its finish (the scale).
  for (int t2 = t; t2 < P; t2 += kThreads) row[t2] = scale(chains::dot(q, keys + static_cast<long long>(t2) * C + head, hs));
  __syncthreads();
  if (t == 0) stats[0] = chains::fold(row, 1, P, row[0], Larger{});  // the maximum, from the first score
  __syncthreads();
  const double m = stats[0];
  for (int t2 = t; t2 < P; t2 += kThreads) row[t2] = osprey::math::exp(row[t2] - m);
  __syncthreads();
  if (t == 0) stats[1] = chains::fold(row, 0, P, 0.0, Plus{});  // the sum of exp(pre - max), from 0.0
  __syncthreads();
  const double s = stats[1];
  for (int t2 = t; t2 < P; t2 += kThreads) row[t2] = row[t2] / s;
  __syncthreads();

  // The output: lane c's chain over the positions, a group of values ahead of the fmas.
  if (t < hs) {
    const double* v = values + head + t;
    double acc = 0.0;
    const int groups = P / kValuesAhead;
    double cur[kValuesAhead];
    if (groups > 0) {
#pragma unroll
      for (int u = 0; u < kValuesAhead; ++u) cur[u] = v[static_cast<long long>(u) * C];
    }
    for (int g = 0; g < groups; ++g) {
      const int base = g * kValuesAhead;
      const int next = (g + 1 < groups ? g + 1 : g) * kValuesAhead;
      double nxt[kValuesAhead];
#pragma unroll
      for (int u = 0; u < kValuesAhead; ++u) nxt[u] = v[static_cast<long long>(next + u) * C];
#pragma unroll
      for (int u = 0; u < kValuesAhead; ++u) acc = osprey::math::fma(row[base + u], cur[u], acc);
#pragma unroll
      for (int u = 0; u < kValuesAhead; ++u) cur[u] = nxt[u];
    }
    for (int t2 = groups * kValuesAhead; t2 < P; ++t2) acc = osprey::math::fma(row[t2], v[static_cast<long long>(t2) * C], acc);
    out[head + t] = acc;
  }
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
        attendRow<osprey::math::DivideBy>, out.data(), keyRoom.data(), valueRoom.data(), qkvRow.data(), position,
        static_cast<int>(maxT), static_cast<int>(C), static_cast<int>(hs), bySqrtHs);
  }));
  return out;
}

}  // namespace gpt2::attend_row
