// GPT-2 compiled for the gpu handler on the opencl device (its kernels traced to OpenCL C when first
// launched), as gpt2/cli/run_opencl.cpp compiles it for the CLI.
#include "gpt2_session_on.hpp"
#include "osprey/gpu/opencl/handler.hpp"

namespace osprey::python {

Result<std::unique_ptr<Gpt2Session>> openGpuOpenClSession(const gpt2::HostWeights& weights) {
  auto device = OSPREY_TRY(OpenClDevice::open());
  return Gpt2SessionOn<GpuOpenCl>::open(GpuOpenCl(device), weights);
}

}  // namespace osprey::python
