// The gpu handler on the cuda device (nvcc translation units only; see cuda.hpp).
#pragma once

#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/handler.hpp"

namespace osprey {
using GpuCuda = Gpu<CudaDevice>;
OSPREY_ASSERT_HANDLER(GpuCuda, "gpu(cuda)");
}  // namespace osprey
