// The run body instantiated for the lists handler (compiled by the host compiler).
#include "gpt2/cli/run_job.hpp"
#include "osprey/under.hpp"

namespace gpt2 {

template osprey::Result<void> runJob<osprey::Lists>(osprey::Lists&, ModelJob&, const Streams&);

osprey::Result<void> runJobOnLists(ModelJob& job, const Streams& streams) {
  return osprey::onLists([&](osprey::Lists& h) { return runJob(h, job, streams); });
}

}  // namespace gpt2
