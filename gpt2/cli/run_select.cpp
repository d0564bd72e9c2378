// The entry point for --backend / --device (see run.hpp): osprey::chooseBackend names the handler;
// this file only maps it to the entry point this program linked for it, and checks --products.
#include <string>

#include <fmt/format.h>

#include "gpt2/cli/fast_refusal.hpp"
#include "gpt2/cli/run.hpp"
#include "osprey/under.hpp"

namespace gpt2 {
HandlerEntries hostEntries() { return HandlerEntries{&runJobOnLists, &runJobOnGpuHost, nullptr}; }

osprey::Result<JobRunner> selectRunner(const BackendChoice& choice, const HandlerEntries& entries) {
  if (!choice.products.empty() && choice.backend != "fast")
    return osprey::Error{fmt::format("--products {} applies to the fast backend; the {} backend's products are "
                                     "exact", choice.products, choice.backend)};
  // Which handler: the library's boundary decides, and words every refusal.
  const bool cudaLinked = entries.gpuCuda != nullptr && entries.fast != nullptr;
  const auto chosen = osprey::chooseBackend(choice.backend, choice.device, cudaLinked, entries.gpuOpenCl != nullptr);
  if (!chosen.ok()) return choice.backend == "fast" ? fastRefusal(chosen.error()) : chosen.error();
  switch (*chosen) {
    case osprey::Backend::Lists: return JobRunner{entries.lists};
    case osprey::Backend::GpuHost: return JobRunner{entries.gpuHost};
    case osprey::Backend::GpuCuda: return JobRunner{entries.gpuCuda};
    case osprey::Backend::GpuOpenCl: return JobRunner{entries.gpuOpenCl};
    case osprey::Backend::Fast: break;
  }
  if (!choice.products.empty() && choice.products != "bf16" && choice.products != "tf32")
    return osprey::Error{fmt::format("unknown --products `{}`: choose bf16 or tf32", choice.products)};
  const FastProducts products = choice.products == "tf32" ? FastProducts::Tf32 : FastProducts::Bf16;
  return JobRunner{[run = entries.fast, products](ModelJob& job, const Streams& streams) -> osprey::Result<void> {
    auto done = run(job, streams, products);
    // Only the device's own advice is reworded; every other failure of the run is its own.
    if (!done.ok() && done.error().message.find("OSPREY_GPU=host") != std::string::npos)
      return fastRefusal(done.error());
    return done;
  }};
}

}  // namespace gpt2
