// The run body instantiated for the gpu handler on the opencl device (compiled by the host
// compiler; every kernel is traced to OpenCL C when it is first launched).
#include "gpt2/cli/run_job.hpp"
#include "osprey/gpu/opencl/handler.hpp"
#include "osprey/under.hpp"

namespace gpt2 {

template osprey::Result<void> runJob<osprey::GpuOpenCl>(osprey::GpuOpenCl&, ModelJob&, const Streams&);

osprey::Result<void> runJobOnGpuOpenCl(ModelJob& job, const Streams& streams) {
  return osprey::onGpuOpenCl([&](osprey::GpuOpenCl& h) { return runJob(h, job, streams); });
}

}  // namespace gpt2
