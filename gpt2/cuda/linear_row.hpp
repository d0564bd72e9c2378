// One decoded row's linear layer and the residual connection after it, x + (Wᵀ · in + bias), in
// the product's own kernel (gpt2/cuda/recorded_cuda.hpp answers linearResidual with it for one
// row). Decoding otherwise runs two launches there, each a wait: the few-columns product and the
// build that adds the bias and the residual (gpt2::linearResidual's linearThen). Here the device's
// one-row tensor-core kernel (osprey/gpu/cuda/kernels/row_dmma.hpp; its few-columns kernel,
// narrow_matmul.hpp, for rows it does not take or a device without the FP64 mma shapes) runs each
// output's chain as the product does and stores x[o] + (acc + bias[o]): the build's two additions
// in its order, so the same doubles; tests/cuda/recorded_decoding_test.cu compares them bit for bit.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/linear_row.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>

#include "gpt2/layers/linear.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/kernels/narrow_matmul.hpp"
#include "osprey/gpu/cuda/kernels/row_dmma.hpp"

namespace gpt2::linear_row {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// Output o of the product: the residual stream's x[o] plus the biased product.
struct StoreResidual {
  double* out;
  const double* x;
  const double* bias;
  __device__ void warm(osprey::Index o) const { osprey::cuda_detail::warmLines(bias + o, 1, 0, 1); }
  // The addends, loaded before the chain where the kernel can (row_dmma.hpp's holdFor), then the sum.
  struct Held {
    double x, bias;
  };
  __device__ Held hold(osprey::Index o) const { return {x[o], bias[o]}; }
  __device__ void put(osprey::Index o, double acc, const Held& h) const { out[o] = h.x + (acc + h.bias); }
  __device__ void operator()(osprey::Index o, double acc) const { put(o, acc, hold(o)); }
  __device__ void operator()(osprey::Index o, int, double acc) const { (*this)(o, acc); }
};

}  // namespace

// x + linear(in, wT, bias) for one row in (IC) of handler H (a GpuCuda), in one launch; the lengths
// are checked here as the layers check them.
template <class H>
osprey::Result<Buf<H>> linearResidualOneRow(H& h, const Buf<H>& x, const Buf<H>& in, const Buf<H>& wT,
                                            const Buf<H>& bias, osprey::Index IC, osprey::Index OC) {
  const char* L = "linear";
  OSPREY_CHECK(checkLength(h, in, IC, L, "input"));
  OSPREY_CHECK(checkLength(h, wT, OSPREY_TRY(checkedProduct(L, {OC, IC})), L, "weight"));
  OSPREY_CHECK(checkLength(h, bias, OC, L, "bias"));
  OSPREY_CHECK(checkLength(h, x, OC, "residual", "a"));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> out = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, OC));
  if (OC == 0) return out;
  const StoreResidual store{out.data(), x.data(), bias.data()};
  const bool tensorCores = osprey::cuda_detail::rowDmmaTakes(IC);
  OSPREY_CHECK(device->launchOwn("linear and residual, one row", [&](cudaStream_t stream) {
    if (tensorCores)
      return osprey::cuda_detail::launchRowDmma(osprey::cuda_detail::CopyRow{in.data()}, store, wT.data(), OC,
                                                static_cast<int>(IC), device->multiprocessors(), stream);
    return osprey::cuda_detail::launchNarrow<1, osprey::cuda_detail::NarrowLayout::Plain>(store, wT.data(), in.data(),
                                                                                          OC, IC, stream);
  }));
  return out;
}

}  // namespace gpt2::linear_row
