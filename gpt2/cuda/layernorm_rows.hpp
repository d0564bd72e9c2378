// The reference LayerNorm forward (gpt2/layers/layernorm.hpp) as one kernel for the exact cuda
// handlers (gpt2/cuda/exact_cuda.hpp, recorded_cuda.hpp). Its three launches (the mean's fold, the
// variance's fold, the element build) are, in decoding, three waits for a single row of a few
// hundred values, and in training three passes over the activations. One block holds a few rows
// in shared memory; one thread per row walks the row twice, in column order:
//
//   sum  = 0.0;  sum = sum + x[c]            mean = sum / C
//   acc  = +0.0; d = x[c] - mean; acc = fma(d, d, acc)
//   rstd = 1.0 / sqrt(acc / C + eps)
//
// and then every thread computes ((x[c] - mean) * rstd) * w[c] + b[c] for its share of the
// elements. The backward's per-row part is the same shape: one thread per row runs the two chains
// of its statistics (dnorm's sum as fma(dnorm, 1.0, acc), and fma(dnorm, norm, acc)), then every
// thread computes dx; dw and db, sums down the columns, stay the reference's row folds. These are
// the reference's own operations in its order (sumRows's seed and combine, dotRows's fused
// chains, the builds' expressions, which -fmad=false keeps unfused), so the same doubles;
// tests/cuda/exact_cuda_test.cu compares every output bit for bit.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/layernorm_rows.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>

#include "gpt2/layers/layernorm.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/math.hpp"

namespace gpt2::layernorm_rows {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kThreads = 128;
constexpr int kMostRows = 8;                         // rows a block, at most
constexpr int kAhead = 8;  // a folding thread's loads issued before the chain's operations on them
// Dynamic shared memory without opting in to more: 48 KiB less room for the kernels' static arrays.
constexpr long long kSharedBytes = 46 * 1024;
constexpr long long kLongestRow = kSharedBytes / 8 - 1;  // one row and its padding must fit

// Rows a block takes for rows of C: as many as fit, padded by one element so that the folding
// threads' reads of neighbouring rows fall in different banks.
inline int rowsPerBlock(long long C) {
  const long long fit = kSharedBytes / (8 * (C + 1));
  return static_cast<int>(fit < kMostRows ? fit : kMostRows);
}

__global__ void __launch_bounds__(kThreads)
    layerNormRows(double* __restrict__ out, double* __restrict__ mean, double* __restrict__ rstd,
                  const double* __restrict__ x, const double* __restrict__ w, const double* __restrict__ b,
                  long long N, long long C, int rows) {
  extern __shared__ double held[];  // [rows][C + 1]
  __shared__ double meanOf[kMostRows], rstdOf[kMostRows];
  const long long n0 = static_cast<long long>(blockIdx.x) * rows;
  const long long count = N - n0 < rows ? N - n0 : rows;
  const long long ld = C + 1;
  const int t = static_cast<int>(threadIdx.x);
  for (long long e = t; e < count * C; e += kThreads) held[(e / C) * ld + e % C] = x[n0 * C + e];
  __syncthreads();
  if (t < count) {
    const double* row = held + t * ld;
    const auto Cs = static_cast<double>(C);
    // Each chain walks its row in column order; kAhead loads go out together, so the chain waits
    // on its own operations rather than on each load in turn.
    double sum = 0.0;
    long long c = 0;
    for (; c + kAhead <= C; c += kAhead) {
      double v[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) v[u] = row[c + u];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) sum = sum + v[u];
    }
    for (; c < C; ++c) sum = sum + row[c];
    const double m = sum / Cs;
    double acc = 0.0;
    for (c = 0; c + kAhead <= C; c += kAhead) {
      double v[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) v[u] = row[c + u];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        const double d = v[u] - m;
        acc = __fma_rn(d, d, acc);
      }
    }
    for (; c < C; ++c) {
      const double d = row[c] - m;
      acc = __fma_rn(d, d, acc);
    }
    const double r = 1.0 / osprey::math::sqrt(acc / Cs + kLayerNormEps);
    meanOf[t] = m;
    rstdOf[t] = r;
    mean[n0 + t] = m;
    rstd[n0 + t] = r;
  }
  __syncthreads();
  for (long long e = t; e < count * C; e += kThreads) {
    const long long n = e / C, c = e % C;
    const double norm = (held[n * ld + c] - meanOf[n]) * rstdOf[n];
    out[n0 * C + e] = norm * w[c] + b[c];
  }
}


// dx for rows of dout and x (gpt2::reference::layernormBackward's stats fold and dx build).
__global__ void __launch_bounds__(kThreads)
    layerNormBackwardRows(double* __restrict__ dx, const double* __restrict__ dout, const double* __restrict__ x,
                          const double* __restrict__ w, const double* __restrict__ mean,
                          const double* __restrict__ rstd, long long N, long long C, int rows) {
  extern __shared__ double held[];  // dout then x, [rows][C + 1] each
  __shared__ double dnormMean[kMostRows], dnormNormMean[kMostRows];
  const long long n0 = static_cast<long long>(blockIdx.x) * rows;
  const long long count = N - n0 < rows ? N - n0 : rows;
  const long long ld = C + 1;
  double* heldDout = held;
  double* heldX = held + rows * ld;
  const int t = static_cast<int>(threadIdx.x);
  for (long long e = t; e < count * C; e += kThreads) {
    const long long at = (e / C) * ld + e % C;
    heldDout[at] = dout[n0 * C + e];
    heldX[at] = x[n0 * C + e];
  }
  __syncthreads();
  if (t < count) {
    const double* d = heldDout + t * ld;
    const double* v = heldX + t * ld;
    const double m = mean[n0 + t], r = rstd[n0 + t];
    const auto Cs = static_cast<double>(C);
    double sumDnorm = 0.0, sumDnormNorm = 0.0;
    const auto step = [&](double wc, double dc, double vc) {
      const double dnorm = wc * dc;
      sumDnorm = __fma_rn(dnorm, 1.0, sumDnorm);
      const double norm = (vc - m) * r;
      sumDnormNorm = __fma_rn(dnorm, norm, sumDnormNorm);
    };
    long long c = 0;
    for (; c + kAhead <= C; c += kAhead) {  // loads ahead of the chains, as in the forward
      double wv[kAhead], dv[kAhead], vv[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        wv[u] = w[c + u];
        dv[u] = d[c + u];
        vv[u] = v[c + u];
      }
#pragma unroll
      for (int u = 0; u < kAhead; ++u) step(wv[u], dv[u], vv[u]);
    }
    for (; c < C; ++c) step(w[c], d[c], v[c]);
    dnormMean[t] = sumDnorm / Cs;
    dnormNormMean[t] = sumDnormNorm / Cs;
  }
  __syncthreads();
  for (long long e = t; e < count * C; e += kThreads) {
    const long long n = e / C, c = e % C, at = n * ld + c;
    const double s = rstd[n0 + n];
    const double norm = (heldX[at] - mean[n0 + n]) * s;
    const double dnorm = w[c] * heldDout[at];
    dx[n0 * C + e] = ((dnorm - dnormMean[n]) - norm * dnormNormMean[n]) * s;
  }
}
}  // namespace

// layernormForward of handler H (a GpuCuda) in one launch; rows too long for the block's shared
// memory, and the empty shapes, take the reference.
template <class H>
osprey::Result<LayerNormOut<H>> layernormOneLaunch(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& b,
                                                   osprey::Index N, osprey::Index C) {
  if (C <= 0 || C > kLongestRow || N <= 0) return reference::layernormForward(h, x, w, b, N, C);
  const osprey::Index NC = OSPREY_TRY(detail::checkLayernormForward(h, x, w, b, N, C));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> out = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, NC));
  Buf<H> mean = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, N));
  Buf<H> rstd = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, N));
  const int perBlock = rowsPerBlock(C);
  const osprey::Index blocks = (N + perBlock - 1) / perBlock;
  const std::size_t shared = static_cast<std::size_t>(perBlock) * static_cast<std::size_t>(C + 1) * sizeof(double);
  OSPREY_CHECK(device->launchOwn("layernorm (one launch)", [&](cudaStream_t stream) {
    layerNormRows<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(out.data(), mean.data(), rstd.data(),
                                                                             x.data(), w.data(), b.data(), N, C,
                                                                             perBlock);
    return cudaGetLastError();
  }));
  return LayerNormOut<H>{std::move(out), std::move(mean), std::move(rstd)};
}

// layernormBackward of handler H: dx in one launch, dw and db the reference's column folds; rows
// too long for the block's shared memory, and the empty shapes, take the reference.
template <class H>
osprey::Result<LayerNormGrads<H>> layernormBackwardOneLaunch(H& h, const Buf<H>& dout, const Buf<H>& x,
                                                             const Buf<H>& w, const Buf<H>& mean,
                                                             const Buf<H>& rstd, osprey::Index N, osprey::Index C) {
  if (C <= 0 || 2 * (C + 1) > kLongestRow + 1 || N <= 0)
    return reference::layernormBackward(h, dout, x, w, mean, rstd, N, C);
  const osprey::Index NC = OSPREY_TRY(detail::checkLayernormBackward(h, dout, x, w, mean, rstd, N, C));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> dx = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, NC));
  const int perBlock = rowsPerBlock(2 * (C + 1) - 1);  // two rows (dout's and x's) held per row
  const osprey::Index blocks = (N + perBlock - 1) / perBlock;
  const std::size_t shared = 2 * static_cast<std::size_t>(perBlock) * static_cast<std::size_t>(C + 1) * sizeof(double);
  OSPREY_CHECK(device->launchOwn("layernorm backward (one launch)", [&](cudaStream_t stream) {
    layerNormBackwardRows<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(
        dx.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C, perBlock);
    return cudaGetLastError();
  }));
  auto params = OSPREY_TRY(detail::layernormParamGrads(h, dout, x, mean, rstd, N, C));
  return LayerNormGrads<H>{std::move(dx), std::move(params.dw), std::move(params.db)};
}

}  // namespace gpt2::layernorm_rows
