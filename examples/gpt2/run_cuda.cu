// The run body instantiated for the gpu handler on the cuda device, compiled by nvcc from the
// same headers as run_lists.cpp and run_host.cpp. Built only where nvcc is present.
#include "gpt2/train_ranks_nccl.hpp"  // data parallelism over NCCL: before the loop is instantiated
#include "gpt2/run_job.hpp"
#include "osprey/gpu/cuda_handler.hpp"
#include "osprey/strict.hpp"

namespace gpt2 {

template osprey::Result<void> runJob<osprey::GpuCuda>(osprey::GpuCuda&, ModelJob&, const Streams&);

osprey::Result<void> runJobOnGpuCuda(ModelJob& job, const Streams& streams) {
  auto device = osprey::CudaDevice::open();
  if (!device.ok()) return device.error();
  osprey::GpuCuda h(*device);
  auto done = osprey::strictly([&] { return runJob(h, job, streams); });
  // Launches are queued without waiting; a fault after the last read-back surfaces here.
  if (done.ok()) OSPREY_CHECK((*device)->flush());
  return done;
}

}  // namespace gpt2
