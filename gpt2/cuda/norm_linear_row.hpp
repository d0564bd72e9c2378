// One row's LayerNorm and the linear layer that reads it, in one kernel, for the recorded decoding
// step (gpt2/cuda/recorded_cuda.hpp answers normLinear and normLinearGelu with it for one row).
// Decoding otherwise runs three launches there, each a wait: the LayerNorm (gpt2/cuda/
// layernorm_rows.hpp), the few-columns product Wᵀ · ln (src/gpu/cuda/matmul.cu) and the bias's build.
// Here every block takes kRows rows of wT (OC, IC) and:
//   * warps 1-3 copy those rows into shared memory, a batch of loads in flight a thread, while
//   * warp 0 normalises the row: the lanes copy x, lane 0 runs the LayerNorm's two chains (its
//     sum, then fma(d, d, acc) of the deviations), the lanes build ln = ((x - mean) · rstd) · w + b;
//   * then lanes r < kRows walk their row: acc = fma(wT[row][k], ln[k], acc) from +0.0, k
//     ascending, and write then(row, acc + bias[row]).
// Every block repeats the row's chains (they overlap the copies), so the row is normalised once per
// block instead of once per launch. These are the reference's operations in its order (layernorm's
// folds and build, matMul's chain, transposeAddBias's sum; -fmad=false keeps each unfused), so the
// same doubles; tests/cuda/recorded_decoding_test.cu compares them bit for bit.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/norm_linear_row.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>

#include "gpt2/cuda/chains.hpp"
#include "gpt2/layers/gelu.hpp"
#include "gpt2/layers/layernorm.hpp"
#include "gpt2/layers/linear.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/math.hpp"

namespace gpt2::norm_linear_row {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kThreads = 128;  // warp 0 normalises and then folds; warps 1-3 copy
constexpr int kCopiers = kThreads - 32;
constexpr int kRows = 4;       // rows of wT a block: a 3072-row weight is 768 blocks, one wave
constexpr int kBatch = 8;      // loads a thread issues before it stores them
// Shared memory without opting in to more: ln and kRows rows, each padded to an even length.
constexpr long long kSharedBytes = 46 * 1024;

__host__ __device__ inline long long paddedLength(long long C) { return C + 2 - C % 2; }
inline long long sharedBytes(long long C) { return (kRows + 1) * paddedLength(C) * static_cast<long long>(sizeof(double)); }
// Whether a row of C fits the kernel (GPT-2's 768 and 1024 do; wider rows take the three launches).
inline bool fits(long long C) { return C > 0 && sharedBytes(C) <= kSharedBytes; }

// The element a linear layer writes (gpt2/layers/linear.hpp's Biased), and GELU's (linearGelu's).
struct AsBiased {
  __device__ double operator()(double y) const { return y; }
};
struct Gelu {
  __device__ double operator()(double y) const { return geluValue(y); }
};

template <class Then>
__global__ void __launch_bounds__(kThreads)
    normLinearRow(double* __restrict__ out, const double* __restrict__ x, const double* __restrict__ lnW,
                  const double* __restrict__ lnB, const double* __restrict__ wT, const double* __restrict__ bias,
                  int C, long long OC, Then then) {
  extern __shared__ __align__(16) double held[];  // ln, then the block's rows of wT
  __shared__ double stats[2];
  const int ld = static_cast<int>(paddedLength(C));
  double* ln = held;
  double* rows = held + ld;
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
  const long long row0 = static_cast<long long>(blockIdx.x) * kRows;
  const int count = static_cast<int>(OC - row0 < kRows ? OC - row0 : kRows);
  if (t >= 32) {
    const int total = count * C;
    const double* from = wT + row0 * C;
    for (int e0 = t - 32; e0 < total; e0 += kBatch * kCopiers) {
      double v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (e0 + u * kCopiers < total) v[u] = from[e0 + u * kCopiers];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int e = e0 + u * kCopiers;
        if (e < total) rows[(e / C) * ld + e % C] = v[u];
      }
    }
  } else {
    for (int c = lane; c < C; c += 32) ln[c] = x[c];
    __syncwarp();
    if (lane == 0) {
      const auto Cs = static_cast<double>(C);
      const double m = chains::fold(ln, 0, C, 0.0, Plus{}) / Cs;
      const double acc = chains::fold(ln, 0, C, 0.0, [m](double a, double v) {
        const double d = v - m;
        return __fma_rn(d, d, a);
      });
      stats[0] = m;
      stats[1] = 1.0 / osprey::math::sqrt(acc / Cs + kLayerNormEps);
    }
    __syncwarp();
    const double m = stats[0], r = stats[1];
    for (int c = lane; c < C; c += 32) {
      const double norm = (ln[c] - m) * r;
      ln[c] = norm * lnW[c] + lnB[c];
    }
  }
  __syncthreads();
  if (t < count) {
    const double acc = chains::dot(rows + t * ld, ln, C);
    out[row0 + t] = then(acc + bias[row0 + t]);
  }
}

}  // namespace

// then(linear(layernorm(x), wT, bias)) for one row x (C) of handler H (a GpuCuda), in one launch:
// the caller has checked that the row fits (fits(C)); the lengths are checked here as the layers do.
template <class H, class Then>
osprey::Result<Buf<H>> normLinearOneRow(H& h, const Buf<H>& x, const Buf<H>& lnWeight, const Buf<H>& lnBias,
                                        const Buf<H>& wT, const Buf<H>& bias, osprey::Index C, osprey::Index OC,
                                        Then then) {
  OSPREY_CHECK(detail::checkLayernormForward(h, x, lnWeight, lnBias, 1, C));
  const char* L = "linear";
  OSPREY_CHECK(checkLength(h, wT, OSPREY_TRY(checkedProduct(L, {OC, C})), L, "weight"));
  OSPREY_CHECK(checkLength(h, bias, OC, L, "bias"));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> out = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, OC));
  if (OC == 0) return out;
  const osprey::Index blocks = (OC + kRows - 1) / kRows;
  OSPREY_CHECK(device->launchOwn("layernorm and linear, one row", [&](cudaStream_t stream) {
    normLinearRow<<<static_cast<unsigned>(blocks), kThreads, static_cast<std::size_t>(sharedBytes(C)), stream>>>(
        out.data(), x.data(), lnWeight.data(), lnBias.data(), wT.data(), bias.data(), static_cast<int>(C), OC, then);
    return cudaGetLastError();
  }));
  return out;
}

}  // namespace gpt2::norm_linear_row
