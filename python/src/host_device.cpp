// The host device (OpenMP on every core) behind Python's Buffers.
#include "device_on.hpp"
#include "osprey/gpu/host/handler.hpp"

namespace osprey::python {

Result<std::shared_ptr<Device>> openHostDevice() {
  auto runtime = OSPREY_TRY(HostDevice::open());
  // One Device for the process, as there is one HostDevice.
  static const auto device = std::make_shared<DeviceOn<HostDevice>>(runtime, DeviceKind::Host, 0);
  return std::shared_ptr<Device>(device);
}

}  // namespace osprey::python
