// The gpu handler on the opencl device: the one GPU surface, its kernels traced to OpenCL C.
#pragma once

#include "osprey/gpu/handler.hpp"
#include "osprey/gpu/opencl/device.hpp"

namespace osprey {
using GpuOpenCl = Gpu<OpenClDevice>;
OSPREY_ASSERT_HANDLER(GpuOpenCl, "gpu(opencl)");
}  // namespace osprey
