// Choosing the entry point for --backend / --device (see run.hpp).
#include <fmt/format.h>

#include "gpt2/cli/run.hpp"
#include "osprey/under.hpp"

namespace gpt2 {

HandlerEntries hostEntries() { return HandlerEntries{&runJobOnLists, &runJobOnGpuHost, nullptr}; }

osprey::Result<JobRunner> selectRunner(const BackendChoice& choice, const HandlerEntries& entries) {
  if (!choice.products.empty() && choice.backend != "fast")
    return osprey::Error{fmt::format("--products {} applies to the fast backend; the {} backend's products are "
                                     "exact", choice.products, choice.backend)};
  if (choice.backend == "lists") {
    if (!choice.device.empty())
      return osprey::Error{fmt::format("--device {} applies to the gpu backend; the lists backend "
                                       "runs on the host", choice.device)};
    return JobRunner{entries.lists};
  }
  if (choice.backend == "fast") {
    if (!choice.device.empty() && choice.device != "cuda")
      return osprey::Error{fmt::format("--device {}: the fast backend runs on the cuda device only (float "
                                       "storage, tensor-core products); choose --device cuda or leave it out",
                                       choice.device)};
    if (!entries.fast)
      return osprey::Error{"backend `fast` runs on a CUDA device: this osprey-gpt2 was built without nvcc "
                           "(rebuild where nvcc is installed, or choose gpu or lists)"};
    if (!choice.products.empty() && choice.products != "bf16" && choice.products != "tf32")
      return osprey::Error{fmt::format("unknown --products `{}`: choose bf16 or tf32", choice.products)};
    const FastProducts products = choice.products == "tf32" ? FastProducts::Tf32 : FastProducts::Bf16;
    return JobRunner{[run = entries.fast, products](ModelJob& job, const Streams& streams) {
      return run(job, streams, products);
    }};
  }
  if (choice.backend != "gpu")
    return osprey::Error{fmt::format("unknown backend `{}`: choose gpu, fast or lists", choice.backend)};

  std::string device = choice.device;
  if (device.empty()) device = OSPREY_TRY(osprey::gpuDeviceFromEnvironment());
  if (device == "host") return JobRunner{entries.gpuHost};
  if (device == "cuda") {
    if (!entries.gpuCuda)
      return osprey::Error{"gpu device `cuda`: this osprey-gpt2 was built without nvcc, so it cannot "
                           "run on a CUDA device (rebuild where nvcc is installed, or choose "
                           "--device host)"};
    return JobRunner{entries.gpuCuda};
  }
  return osprey::Error{fmt::format("unknown gpu device `{}`: choose host or cuda", device)};
}

}  // namespace gpt2
