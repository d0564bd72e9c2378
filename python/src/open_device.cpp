// The device a name (or OSPREY_GPU) chooses, decided by the library's boundary as for the CLI.
#include "device.hpp"
#include "osprey/under.hpp"

namespace osprey::python {

Result<std::shared_ptr<Device>> openDevice(std::string_view name) {
  const Backend chosen = OSPREY_TRY(chooseBackend("gpu", name, builtWithCuda(), builtWithOpenCl()));
  if (chosen == Backend::GpuCuda) return openCudaDevice();
  if (chosen == Backend::GpuOpenCl) return openOpenClDevice();
  return openHostDevice();
}

}  // namespace osprey::python
