// The reference causal softmax and its backward's per-row part (gpt2::reference::causalSoftmax,
// causalSoftmaxBackward in gpt2/layers/attention.hpp) in kernels shaped for the exact cuda handler
// (gpt2/cuda/exact_cuda.hpp). Over the (B·NH·T, T) table the reference runs two row folds whose
// terms hold an exp each, then a build that computes every exp again; here each exp is computed
// once, by one thread of its own, and the folds only load:
//
//   forward   maxima: fold of pre = scale(score) from the first term, with Larger
//             att = exp(pre - max) on the prefix, 0 past it          (a thread an element)
//             sums:   fold of att from 0.0, with Plus
//             att = att / sum on the prefix                          (a thread an element)
//   backward  dots:   fold of Product{att, datt} from +0.0, with FusedMultiplyAdd
//             dscore = scale(att · (datt - dot)) on the prefix, 0 past it
//
// A fold gives a warp one row (the device's many-row fold, osprey/gpu/cuda/kernels/row_folds.hpp):
// the lanes load the row a chunk at a time, contiguously, and lane 0 combines it in column order
// while the next chunk is in flight. Each row's combines are one thread's, in column order, and
// every value is the reference's expression (-fmad=false keeps each operation on its own), so the
// maxima, sums, dot products and tables are the reference's doubles. Two other shapes were measured slower (bench/RESULTS.md): exps inside the folds (a
// branchy exp gives a thread little to overlap, so the exps need a thread each), and a lane a row
// over 32 rows (each tile's 32 pieces of rows 8 KiB apart streamed at a tenth of the builds'
// rate). tests/cuda/exact_cuda_test.cu compares both tables bit for bit, NaN, infinities and
// signed zeros among the inputs.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/softmax_rows.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>

#include "gpt2/layers/attention.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/kernels/row_folds.hpp"
#include "osprey/math.hpp"

namespace gpt2::softmax_rows {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kBuildThreads = 256;              // a build block's columns
constexpr long long kBuildRowBlocks = 2048;     // a build's blocks down the rows (each then takes ~R/2048)
constexpr int kRowsAhead = 4;                   // rows a build thread computes before it stores

// out[r·T + c] = entry(r, c) on row r's causal prefix; past it 0.0 when `zeros`, else left as it
// is. A thread a column: blockIdx.x picks the columns, blockIdx.y the first row, and the thread
// takes rows gridDim.y apart, kRowsAhead of them at a time with every entry computed (its loads
// in flight together) before any is stored. Few long-lived blocks instead of a block a row: the
// builds moved 1.6-2 TB/s with a thread an element (bench/cuda/NOTES.md, twenty-eighth run).
template <class Entry>
__global__ void __launch_bounds__(kBuildThreads)
    prefixBuildRows(double* out, long long rows, long long T, bool zeros, Entry entry) {
  const long long c = static_cast<long long>(blockIdx.x) * kBuildThreads + threadIdx.x;
  if (c >= T) return;
  const long long step = gridDim.y, stepInRow = step % T;
  long long t = blockIdx.y % T;  // r % T for the batch's first row, kept as r advances
  for (long long r0 = blockIdx.y; r0 < rows; r0 += kRowsAhead * step) {
    double value[kRowsAhead];
    bool onPrefix[kRowsAhead], written[kRowsAhead];
    long long tu = t;
#pragma unroll
    for (int u = 0; u < kRowsAhead; ++u) {
      const long long r = r0 + u * step;
      onPrefix[u] = r < rows && c <= tu;
      written[u] = r < rows && (onPrefix[u] || zeros);
      if (onPrefix[u]) value[u] = entry(r, c);
      tu += stepInRow;
      if (tu >= T) tu -= T;
    }
#pragma unroll
    for (int u = 0; u < kRowsAhead; ++u)
      if (written[u]) out[(r0 + u * step) * T + c] = onPrefix[u] ? value[u] : 0.0;
    t = tu;
  }
}

// The entries and terms above, as trivially copyable closures (the launches take them by value),
// each the reference's expression on entries of (rows, T) tables.
struct Table {  // entry (r, c)
  const double* values;
  long long T;
  __device__ double operator()(long long r, long long c) const { return values[r * T + c]; }
};
struct ScaledScore {  // pre = scale(score)
  Table scores;
  osprey::math::DivideBy scale;
  __device__ double operator()(long long r, long long c) const { return scale(scores(r, c)); }
};
struct ShiftedExp {  // exp(pre - max)
  ScaledScore pre;
  const double* maxima;
  __device__ double operator()(long long r, long long c) const {
    return osprey::math::exp(pre(r, c) - maxima[r]);
  }
};
struct Normalised {  // entry / sum of its row
  Table table;
  const double* sums;
  __device__ double operator()(long long r, long long c) const { return table(r, c) / sums[r]; }
};
struct AttTimesDatt {  // the dot product's term
  Table att, datt;
  __device__ Product operator()(long long r, long long c) const { return Product{att(r, c), datt(r, c)}; }
};
struct ScoreGradient {  // scale(att · (datt - dot))
  Table att, datt;
  const double* dots;
  osprey::math::DivideBy scale;
  __device__ double operator()(long long r, long long c) const { return scale(att(r, c) * (datt(r, c) - dots[r])); }
};

// out[r] = the fold over row r's causal prefix (r % T + 1 terms) of term(r, c), in column order, from
// term(r, 0) (fromFirst) or from seed: the device's many-row fold, a warp a row (cuda_detail::
// warpRowFoldKernel), one row a warp. Launch id 0: an own launch has no entry in the device's
// ledger of launches; launchOwn reports its status.
struct CausalLength {  // detail::CausalPrefix
  long long T;
  __device__ osprey::Index operator()(osprey::Index r) const { return r % T + 1; }
};

template <class Term, class Combine>
osprey::Result<void> foldPrefixes(osprey::CudaDevice& device, const char* label, double* out, long long R, long long T,
                                  bool fromFirst, double seed, Term term, Combine combine) {
  using osprey::cuda_detail::kWarpFoldWarps;
  return device.launchOwn(label, [&](cudaStream_t stream) {
    osprey::cuda_detail::warpRowFoldKernel<<<static_cast<unsigned>((R + kWarpFoldWarps - 1) / kWarpFoldWarps),
                                             kWarpFoldWarps * 32, 0, stream>>>(out, R, CausalLength{T}, seed, fromFirst,
                                                                               term, combine, AsIs{}, 0ull);
    return cudaGetLastError();
  });
}

template <class Entry>
osprey::Result<void> buildPrefixes(osprey::CudaDevice& device, const char* label, double* out, long long R,
                                   long long T, bool zeros, Entry entry) {
  const dim3 grid(static_cast<unsigned>((T + kBuildThreads - 1) / kBuildThreads),
                  static_cast<unsigned>(R < kBuildRowBlocks ? R : kBuildRowBlocks));
  return device.launchOwn(label, [&](cudaStream_t stream) {
    prefixBuildRows<<<grid, kBuildThreads, 0, stream>>>(out, R, T, zeros, entry);
    return cudaGetLastError();
  });
}

}  // namespace

// detail::causalSoftmax's answer on handler H (a GpuCuda); the caller has checked the shape and the
// scores' length.
template <class H>
osprey::Result<Buf<H>> causalSoftmaxRows(H& h, const Buf<H>& scores, osprey::Index R, osprey::Index T,
                                         osprey::math::DivideBy scale) {
  if (R == 0) return reference::causalSoftmax(h, scores, R, T, scale);
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> att = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, R * T));
  Buf<H> maxima = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, R));
  Buf<H> sums = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, R));
  const ScaledScore pre{Table{scores.data(), T}, scale};
  OSPREY_CHECK(foldPrefixes(*device, "causal softmax: maxima", maxima.data(), R, T, true, 0.0, pre, Larger{}));
  OSPREY_CHECK(buildPrefixes(*device, "causal softmax: exp(pre - max)", att.data(), R, T, true,
                             ShiftedExp{pre, maxima.data()}));
  OSPREY_CHECK(foldPrefixes(*device, "causal softmax: sums", sums.data(), R, T, false, 0.0,
                                   Table{att.data(), T}, Plus{}));
  OSPREY_CHECK(buildPrefixes(*device, "causal softmax: normalised", att.data(), R, T, false,
                             Normalised{Table{att.data(), T}, sums.data()}));
  return att;
}

// detail::causalSoftmaxBackward's answer on handler H (a GpuCuda), the shapes checked by the caller.
template <class H>
osprey::Result<Buf<H>> causalSoftmaxBackwardRows(H& h, const Buf<H>& att, const Buf<H>& datt, osprey::Index R,
                                                 osprey::Index T, osprey::math::DivideBy scale) {
  if (R == 0) return reference::causalSoftmaxBackward(h, att, datt, R, T, scale);
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> dscore = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, R * T));
  Buf<H> dots = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, R));
  OSPREY_CHECK(foldPrefixes(*device, "causal softmax backward: dots", dots.data(), R, T, false, 0.0,
                                   AttTimesDatt{Table{att.data(), T}, Table{datt.data(), T}}, FusedMultiplyAdd{}));
  OSPREY_CHECK(buildPrefixes(*device, "causal softmax backward: dscore", dscore.data(), R, T, true,
                             ScoreGradient{Table{att.data(), T}, Table{datt.data(), T}, dots.data(), scale}));
  return dscore;
}

}  // namespace gpt2::softmax_rows
