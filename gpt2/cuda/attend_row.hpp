// One decoded position's attention in one launch, for the recorded decoding step
// (gpt2/cuda/recorded_cuda.hpp answers attendAppending with it). The reference takes five launches
// there, each a wait between dependent kernels: the append of the new key and value, and
// detail::attendCached's four row folds (the scores, their maxima, the sums of exp, the output).
// Here one block takes one head and does all of it, the block's threads computing terms and one
// thread running each fold that is a single chain:
//   * before its wait for the kernels before it, the head's earlier keys and values are sent toward
//     the L2; then the head's channels of the new key and value are written at *position
//     (appendAtPosition's doubles), q's into shared memory;
//   * every thread takes positions t2 <= *position: pre[t2] = scale(fma chain of q · k over the
//     head's channels, from +0.0, channel ascending, the key's loads a group ahead) into shared
//     memory;
//   * thread 0 folds the maximum from pre[0] (Larger: the earlier of equal values is kept); the
//     threads write e[t2] = exp(pre[t2] - max); thread 0 sums them from 0.0, t2 ascending; the
//     threads write att[t2] = e[t2] / sum;
//   * lanes c < hs run out[c] = fma chain of att[t2] · v[t2][c] from +0.0, t2 ascending, the next
//     group of values loaded while the current group's fmas run (chains::dotAhead).
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
constexpr int kKeysAhead = 32;    // a key's channels a thread holds in registers, per group
constexpr int kValuesAhead = 32;  // positions of V a lane holds in registers, per group

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
  const long long head = static_cast<long long>(blockIdx.x) * hs;
  // Position p's row of this head in a cache room (maxT, C).
  const auto rowOf = [&](double* room, int p) { return room + static_cast<long long>(p) * C + head; };
  osprey::cuda_detail::startDependents();  // the projection after it may stage its weights
  // Before the wait: the head's keys and values at the positions before this one (earlier steps
  // wrote them, no kernel of this step does) go toward the L2, a 128-byte line at a time, so that
  // the chains below read the L2 rather than the memory. The position is only a hint here, read
  // past the L1 (ld.global.cg): in a replay it is this step's (the previous step's choice finished
  // before this step began); a stale one would only send other rows of the room.
  if (const int before = __ldcg(position); before > 0 && before < maxT)
    for (double* room : {keys, values})
      for (int e = t * 16; e < before * hs; e += kThreads * 16) prefetchToL2(rowOf(room, e / hs) + e % hs);
  osprey::cuda_detail::awaitEarlierKernels();  // the position, qkv and the cache are earlier kernels'
  const int at = *position;
  if (at < 0 || at >= maxT) return;  // never replayed (recorded_cuda.hpp queues no step past the context)
  const int P = at + 1;
  double *newKey = rowOf(keys, at), *newValue = rowOf(values, at);
  for (int d = t; d < hs; d += kThreads) {
    const double k = qkv[C + head + d], v = qkv[2LL * C + head + d];
    newKey[d] = k;
    newValue[d] = v;
    q[d] = qkv[head + d];
  }
  __syncthreads();  // the new key and value and q are written (the block's writes are visible to it)

  // The scores: the reference's dot fold over the head's channels, then its finish (the scale).
  for (int t2 = t; t2 < P; t2 += kThreads)
    row[t2] = scale(chains::dotAhead<kKeysAhead>(q, rowOf(keys, t2), 1, hs));
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

  // The output: lane c's chain over the positions, the values a group ahead of the fmas.
  if (t < hs) out[head + t] = chains::dotAhead<kValuesAhead>(row, rowOf(values, 0) + t, C, P);
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
