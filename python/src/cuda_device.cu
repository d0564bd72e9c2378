// The cuda device behind Python's Buffers (compiled by nvcc where the module is built with CUDA).
#include <map>
#include <mutex>

#include "device_on.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/raw_pointer.hpp"

namespace osprey::python {

Result<std::shared_ptr<Device>> openCudaDevice() {
  auto runtime = OSPREY_TRY(CudaDevice::open());  // "no CUDA device: ..." where there is none
  // One Device per runtime, so its ordinal is asked of the driver once.
  static std::mutex opening;
  static std::map<const CudaDevice*, std::shared_ptr<Device>> opened;
  std::lock_guard lock(opening);
  auto& device = opened[runtime.get()];
  if (!device) {
    const int ordinal = OSPREY_TRY(cudaOrdinal(*runtime));
    device = std::make_shared<DeviceOn<CudaDevice>>(runtime, DeviceKind::Cuda, ordinal);
  }
  return device;
}

bool builtWithCuda() { return true; }

}  // namespace osprey::python
