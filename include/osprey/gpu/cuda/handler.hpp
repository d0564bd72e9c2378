// The gpu handler on the cuda device (nvcc translation units only; see cuda/device.hpp).
#pragma once

#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/device_runtime.hpp"
#include "osprey/gpu/handler.hpp"

namespace osprey {
// The cuda runtime's contract, asserted where its handler is made (cuda/device.hpp is the runtime
// alone): doubles for GpuCuda, and the floats the fast handler (cuda/fast.hpp) stores.
OSPREY_ASSERT_DEVICE(CudaDevice, "cuda");
static_assert(DeviceStorage<CudaDevice, float>, "cuda is no DeviceRuntime for floats (the fast handler's storage)");
using GpuCuda = Gpu<CudaDevice>;
OSPREY_ASSERT_HANDLER(GpuCuda, "gpu(cuda)");
}  // namespace osprey
