// GpuCudaEachLaunch: the gpu handler on the cuda device with every launch waited for and checked
// as it completes (CudaDevice::setCheckEachLaunch), so a kernel fault is the launching
// operation's own Error in exactly the host's words.
//
// The cuda device normally defers fault checks to the next read-back (include/osprey/gpu/cuda/device.hpp).
// The typed test cases that expect the launching operation itself to fail (strict faults, bad
// token ids in the layers) run on this handler; everything else runs on plain GpuCuda. The mode
// belongs to the device, which every handler shares, so the handler restores the previous mode
// when it goes away.
#pragma once

#include <memory>
#include <stdexcept>

#include "handlers.hpp"
#include "osprey/gpu/cuda/handler.hpp"

namespace osprey::testing {

class GpuCudaEachLaunch : public GpuCuda {
 public:
  explicit GpuCudaEachLaunch(std::shared_ptr<CudaDevice> device)
      : GpuCuda(device), m_before(device->checksEachLaunch()) {
    device->setCheckEachLaunch(true);
  }
  ~GpuCudaEachLaunch() { runtime()->setCheckEachLaunch(m_before); }
  GpuCudaEachLaunch(const GpuCudaEachLaunch&) = delete;
  GpuCudaEachLaunch& operator=(const GpuCudaEachLaunch&) = delete;

 private:
  bool m_before;
};
OSPREY_ASSERT_HANDLER(GpuCudaEachLaunch, "gpu(cuda, each launch checked)");

template <>
inline GpuCudaEachLaunch makeHandler<GpuCudaEachLaunch>() {
  auto device = CudaDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return GpuCudaEachLaunch(*device);
}
template <>
inline DeviceNaming expectedDeviceNaming<GpuCudaEachLaunch>() {
  return {"cuda: ", false};
}
template <>
inline const char* handlerName<GpuCudaEachLaunch>() {
  return "GpuCudaEachLaunch";
}

}  // namespace osprey::testing
