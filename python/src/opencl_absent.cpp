// A module built without OpenCL's loader and headers: the opencl device, and GPT-2's gpu/opencl
// handler, are errors that say so (the CLI's words, from osprey::chooseBackend), never the host in
// their place. (openDevice and openGpt2Session refuse before reaching these; they exist so the
// module links.)
#include "device.hpp"
#include "gpt2_session.hpp"
#include "osprey/under.hpp"

namespace osprey::python {

bool builtWithOpenCl() { return false; }

Result<std::shared_ptr<Device>> openOpenClDevice() {
  return chooseBackend("gpu", "opencl", builtWithCuda(), false).error();
}

Result<std::unique_ptr<Gpt2Session>> openGpuOpenClSession(const gpt2::HostWeights&) {
  return chooseBackend("gpu", "opencl", builtWithCuda(), false).error();
}

}  // namespace osprey::python
