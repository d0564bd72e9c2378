// One row's LayerNorm and the linear layer that reads it, in one kernel, for the recorded decoding
// step (gpt2/cuda/recorded_cuda.hpp answers normLinear and normLinearGelu with it for one row).
// Decoding otherwise runs three launches there, each a wait: the LayerNorm (gpt2/cuda/
// layernorm_rows.hpp), the few-columns product Wᵀ · ln (src/gpu/cuda/matmul.cu) and the bias's build.
// Here the device's one-row tensor-core kernel (osprey/gpu/cuda/kernels/row_dmma.hpp) takes up to 16
// rows of wT (OC, IC) a block, its copier warps staging them while the block normalises the row:
//   * every thread loads its share of x; the computing warp runs the LayerNorm's two chains (its
//     sum, then fma(d, d, acc) of the deviations d = x - mean) as tensor-core chains; every thread builds
//     ln = (d · rstd) · w + b, w and b loaded into registers before the kernel waited for x;
//   * then the product's chains, acc = fma(wT[row][k], ln[k], acc) from +0.0, k ascending, and
//     then(row, acc + bias[row]).
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

#include "gpt2/layers/gelu.hpp"
#include "gpt2/layers/layernorm.hpp"
#include "gpt2/layers/linear.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/kernels/row_dmma.hpp"
#include "osprey/math.hpp"

namespace gpt2::norm_linear_row {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// Whether a row of C fits the kernel (GPT-2's widths do; wider rows take the three launches), and
// the device runs it.
inline bool fits(long long C) { return osprey::cuda_detail::rowDmmaTakes(C); }

// The element a linear layer writes (gpt2/layers/linear.hpp's Biased), and GELU's (linearGelu's).
struct AsBiased {
  __device__ double operator()(double y) const { return y; }
};
struct Gelu {
  __device__ double operator()(double y) const { return geluValue(y); }
};

// The kernel's prologue: ln = layernorm(x) into its operand, as layernormForward builds it (the
// row's mean and rstd to *mean and *rstd where they are given). Every thread loads x and builds ln;
// one warp runs the two chains between (osprey/gpu/cuda/kernels/row_dmma.hpp names the phases).
struct Normalise {
  const double* x;
  const double* lnW;
  const double* lnB;
  double* mean = nullptr;
  double* rstd = nullptr;
  static constexpr bool kChains = true;
  // The thread's first kHeld elements of w and b (c = tid + i · threads), loaded before the wait so
  // that the build after the chains waits for no load; a longer row's rest goes toward the L2.
  static constexpr int kHeld = 8;
  struct Held {
    double w[kHeld], b[kHeld];
  };
  __device__ Held hold(int tid, int threads, int C) const {
    Held h;
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int c = tid + i * threads;
      h.w[i] = c < C ? lnW[c] : 0.0;
      h.b[i] = c < C ? lnB[c] : 0.0;
    }
    if (const int past = kHeld * threads; past < C) {
      osprey::cuda_detail::warmLines(lnW + past, C - past, tid, threads);
      osprey::cuda_detail::warmLines(lnB + past, C - past, tid, threads);
    }
    return h;
  }
  __device__ void load(double* ln, int C, int tid, int threads) const {
    osprey::cuda_detail::loadRow(ln, x, C, tid, threads);
  }
  // One warp: the mean's chain, then the variance's chain fma(d, d, acc) of the deviations
  // d = x - mean (each made as the chain loads it, as the build makes it again); stats = {mean, rstd}.
  __device__ void chains(const double* ln, int C, double* stats) const {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const auto Cs = static_cast<double>(C);
    const double m = osprey::cuda_detail::warpSum(ln, C, 0.0) / Cs;
    const double acc = osprey::cuda_detail::warpSquaresAbout(ln, m, C, 0.0);
    const double r = 1.0 / osprey::math::sqrt(acc / Cs + kLayerNormEps);
    if (lane == 0) {
      stats[0] = m;
      stats[1] = r;
      if (mean != nullptr) {
        *mean = m;
        *rstd = r;
      }
    }
  }
  __device__ void build(double* ln, int C, const double* stats, int tid, int threads, const Held& h) const {
    const double m = stats[0], r = stats[1];
    auto normalise = [&](int c, double w, double b) { ln[c] = ((ln[c] - m) * r) * w + b; };
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (const int c = tid + i * threads; c < C) normalise(c, h.w[i], h.b[i]);
    for (int c = tid + kHeld * threads; c < C; c += threads) normalise(c, lnW[c], lnB[c]);
  }
};

// Output o: then(acc + bias[o]).
template <class Then>
struct StoreBiased {
  double* out;
  const double* bias;
  Then then;
  __device__ void warm(osprey::Index o) const { osprey::cuda_detail::warmLines(bias + o, 1, 0, 1); }
  // The bias, loaded before the chain where the kernel can (row_dmma.hpp's holdFor), then the output.
  __device__ double hold(osprey::Index o) const { return bias[o]; }
  __device__ void put(osprey::Index o, double acc, double b) const { out[o] = then(acc + b); }
  __device__ void operator()(osprey::Index o, double acc) const { put(o, acc, hold(o)); }
};

constexpr int kNormaliseThreads = 128;

// One row's LayerNorm alone (the last one, before the lm head): one block, the row in shared memory.
__global__ void __launch_bounds__(kNormaliseThreads) normaliseRow(double* __restrict__ out, Normalise n, int C) {
  extern __shared__ __align__(16) double normalised[];
  __shared__ double stats[2];
  const int tid = static_cast<int>(threadIdx.x);
  osprey::cuda_detail::BlockTrace trace;
  trace.open(tid == 0);
  osprey::cuda_detail::startDependents();
  const Normalise::Held held = n.hold(tid, kNormaliseThreads, C);
  osprey::cuda_detail::awaitEarlierKernels();
  trace.mark<1>();
  n.load(normalised, C, tid, kNormaliseThreads);
  __syncthreads();
  osprey::cuda_detail::buildOperand(n, normalised, C, stats, tid, kNormaliseThreads, tid < 32, held);
  trace.mark<3>();
  for (int c = tid; c < C; c += kNormaliseThreads) out[c] = normalised[c];
  trace.mark<5>();
  trace.close(osprey::cuda_detail::kTraceNormalise, n.lnW);
}

}  // namespace

// layernormForward of one row x (C) of handler H (a GpuCuda) in one launch, its chains on the tensor
// cores: out, mean and rstd as the reference's layer makes them; the caller has checked fits(C).
template <class H>
osprey::Result<LayerNormOut<H>> layernormOneRow(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& b,
                                                osprey::Index C) {
  OSPREY_CHECK(detail::checkLayernormForward(h, x, w, b, 1, C));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> out = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, C));
  Buf<H> mean = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, 1));
  Buf<H> rstd = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, 1));
  // At most kRowDmmaMostIC doubles (32 KiB): within the shared memory a launch has without opting in.
  OSPREY_CHECK(device->launchOwn("layernorm, one row", [&](cudaStream_t stream) {
    return osprey::cuda_detail::launchOverlapped(
        dim3(1), dim3(kNormaliseThreads), sizeof(double) * static_cast<std::size_t>(C), stream, normaliseRow,
        out.data(), Normalise{x.data(), w.data(), b.data(), mean.data(), rstd.data()}, static_cast<int>(C));
  }));
  return LayerNormOut<H>{std::move(out), std::move(mean), std::move(rstd)};
}

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
  OSPREY_CHECK(device->launchOwn("layernorm and linear, one row", [&](cudaStream_t stream) {
    return osprey::cuda_detail::launchRowDmma(Normalise{x.data(), lnWeight.data(), lnBias.data()},
                                              StoreBiased<Then>{out.data(), bias.data(), then}, wT.data(), OC,
                                              static_cast<int>(C), device->multiprocessors(), stream);
  }));
  return out;
}

}  // namespace gpt2::norm_linear_row
