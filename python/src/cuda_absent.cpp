// A module built without nvcc: the cuda device, and GPT-2's gpu/cuda and fast handlers, are errors
// that say so (the CLI's words, from osprey::chooseBackend), never the host in their place.
// (openDevice and openGpt2Session refuse before reaching these; they exist so the module links.)
#include "device.hpp"
#include "gpt2_session.hpp"
#include "osprey/under.hpp"

namespace osprey::python {

bool builtWithCuda() { return false; }

Result<std::shared_ptr<Device>> openCudaDevice() { return chooseBackend("gpu", "cuda", false).error(); }

Result<std::unique_ptr<Gpt2Session>> openGpuCudaSession(const gpt2::HostWeights&) {
  return chooseBackend("gpu", "cuda", false).error();
}

Result<std::unique_ptr<Gpt2Session>> openFastSession(const gpt2::HostWeights&, bool) {
  return chooseBackend("fast", "", false).error();
}

}  // namespace osprey::python
