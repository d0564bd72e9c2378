// The opencl device behind Python's Buffers (compiled where the build has OpenCL; its kernels
// traced to OpenCL C at launch, as for the CLI's --device opencl).
#include "device_on.hpp"
#include "osprey/gpu/opencl/handler.hpp"

namespace osprey::python {

Result<std::shared_ptr<Device>> openOpenClDevice() {
  // OSPREY_OPENCL_PLATFORM / _DEVICE choose it. open() hands out one runtime while anything holds
  // it, so buffers from two calls are on one device (matMul compares runtimes); when the last
  // buffer goes, the runtime and its OpenCL context go too, rather than at the process's exit.
  auto runtime = OSPREY_TRY(OpenClDevice::open());
  return std::shared_ptr<Device>(std::make_shared<DeviceOn<OpenClDevice>>(runtime, DeviceKind::OpenCl, 0));
}

bool builtWithOpenCl() { return true; }

}  // namespace osprey::python
