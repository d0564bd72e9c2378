// GPT-2 compiled by nvcc for the gpu handler on the cuda device and for the fast handler (float
// storage, tensor-core products, gpt2/fast/), as gpt2/cli/run_cuda.cu and run_fast.cu compile it.
#include "gpt2/fast/fast_handler.hpp"
#include "gpt2/fast/shape_support.hpp"
#include "gpt2_session_on.hpp"
#include "osprey/gpu/cuda/handler.hpp"

namespace osprey::python {

Result<std::unique_ptr<Gpt2Session>> openGpuCudaSession(const gpt2::HostWeights& weights) {
  auto device = OSPREY_TRY(CudaDevice::open());
  return Gpt2SessionOn<GpuCuda>::open(GpuCuda(device), weights);
}

Result<std::unique_ptr<Gpt2Session>> openFastSession(const gpt2::HostWeights& weights, bool tf32Products) {
  // Not `FastHandler handler(OSPREY_TRY(Fast::open()))`: nvcc 13's device front end (cicc)
  // crashes on that statement expression as a constructor's argument.
  auto base = Fast::open();
  if (!base.ok()) return base.error();
  gpt2::FastHandler handler(std::move(*base));
  handler.setProducts(tf32Products ? gpt2::FastHandler::Products::Tf32 : gpt2::FastHandler::Products::Bf16);
  // A continuation whose shape a decoding kernel cannot take stops before any launch, naming it.
  return Gpt2SessionOn<gpt2::FastHandler>::open(std::move(handler), weights, &gpt2::fast_shapes::decodingProblem);
}

}  // namespace osprey::python
