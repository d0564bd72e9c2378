// The run body instantiated for the gpu handler on the cuda device, compiled by nvcc from the
// same headers as run_lists.cpp and run_host.cpp. Built only where nvcc is present.
#include "gpt2/train/ranks_nccl.hpp"  // data parallelism over NCCL: before the loop is instantiated
#include "gpt2/cli/run_job.hpp"
#include "gpt2/cuda/recorded_cuda.hpp"
#include "osprey/under.hpp"

namespace gpt2 {

template osprey::Result<void> runJob<osprey::GpuCuda>(osprey::GpuCuda&, ModelJob&, const Streams&);

// Generation decodes from a recorded step (gpt2/cuda/recorded_cuda.hpp): the same handler and
// the same bits, without a host round trip between the tokens.
osprey::Result<void> runJobOnGpuCuda(ModelJob& job, const Streams& streams) {
  return osprey::onGpuCuda([&](osprey::GpuCuda& h) -> osprey::Result<void> {
    if (auto* generate = std::get_if<GenerateJob>(&job)) {
      RecordedCuda recorded(h.runtime());
      return runJob(recorded, *generate, streams);
    }
    return runJob(h, job, streams);
  });
}

}  // namespace gpt2
