// The run body instantiated for the gpu handler on the cuda device, compiled by nvcc from the
// same headers as run_lists.cpp and run_host.cpp. Built only where nvcc is present.
#include "gpt2/train/ranks_nccl.hpp"  // data parallelism over NCCL: before the loop is instantiated
#include "gpt2/cli/run_job.hpp"
#include "gpt2/cuda/exact_cuda.hpp"
#include "gpt2/cuda/recorded_cuda.hpp"
#include "osprey/under.hpp"

namespace gpt2 {

template osprey::Result<void> runJob<ExactCuda>(ExactCuda&, ModelJob&, const Streams&);

// Every command runs on ExactCuda (gpt2/cuda/exact_cuda.hpp), generation on RecordedCuda, which
// decodes from a recorded step (gpt2/cuda/recorded_cuda.hpp): the gpu handler's bits, in fewer
// launches and without a host round trip between the tokens.
osprey::Result<void> runJobOnGpuCuda(ModelJob& job, const Streams& streams) {
  return osprey::onGpuCuda([&](osprey::GpuCuda& h) -> osprey::Result<void> {
    if (auto* generate = std::get_if<GenerateJob>(&job)) {
      RecordedCuda recorded(h.runtime());
      return runJob(recorded, *generate, streams);
    }
    ExactCuda exact(h.runtime());
    return runJob(exact, job, streams);
  });
}

}  // namespace gpt2
