// The run body instantiated for the gpu handler on the host device (compiled by the host
// compiler, so host kernels are plain lambdas, not nvcc's slower wrappers).
#include "gpt2/cli/run_job.hpp"
#include "osprey/under.hpp"

namespace gpt2 {

template osprey::Result<void> runJob<osprey::GpuHost>(osprey::GpuHost&, ModelJob&, const Streams&);

osprey::Result<void> runJobOnGpuHost(ModelJob& job, const Streams& streams) {
  return osprey::onGpuHost([&](osprey::GpuHost& h) { return runJob(h, job, streams); });
}

}  // namespace gpt2
