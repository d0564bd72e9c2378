// GPT-2 compiled for the lists handler and the gpu handler on the host device, in one translation
// unit (the model's templates are most of the module's compile time).
#include "gpt2_session_on.hpp"
#include "osprey/gpu/host/handler.hpp"
#include "osprey/lists/lists.hpp"

namespace osprey::python {

Result<std::unique_ptr<Gpt2Session>> openListsSession(const gpt2::HostWeights& weights) {
  return Gpt2SessionOn<Lists>::open(Lists{}, weights);
}

Result<std::unique_ptr<Gpt2Session>> openGpuHostSession(const gpt2::HostWeights& weights) {
  auto device = OSPREY_TRY(HostDevice::open());
  return Gpt2SessionOn<GpuHost>::open(GpuHost(device), weights);
}

}  // namespace osprey::python
