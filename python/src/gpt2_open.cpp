// The handler a Python program's choice names, decided as the CLI decides (osprey::chooseBackend,
// gpt2/cli/run_select.cpp): the same refusals, in the same words.
#include <fmt/format.h>

#include "device.hpp"
#include "gpt2/cli/fast_refusal.hpp"
#include "gpt2_session.hpp"
#include "osprey/under.hpp"

namespace osprey::python {
namespace {

Result<Backend> chosenBackend(const SessionChoice& choice) {
  if (!choice.products.empty() && choice.backend != "fast")
    return Error{fmt::format("products `{}` applies to the fast backend; the {} backend's products are exact",
                             choice.products, choice.backend)};
  const auto chosen = chooseBackend(choice.backend, choice.device, builtWithCuda(), builtWithOpenCl());
  if (!chosen.ok()) return choice.backend == "fast" ? gpt2::fastRefusal(chosen.error()) : chosen.error();
  if (*chosen == Backend::Fast && !choice.products.empty() && choice.products != "bf16" && choice.products != "tf32")
    return Error{fmt::format("unknown products `{}`: choose bf16 or tf32", choice.products)};
  return *chosen;
}

}  // namespace

Result<void> checkSessionChoice(const SessionChoice& choice) {
  if (auto chosen = chosenBackend(choice); !chosen.ok()) return chosen.error();
  return {};
}

Result<std::unique_ptr<Gpt2Session>> openGpt2Session(const SessionChoice& choice, const gpt2::HostWeights& weights) {
  switch (OSPREY_TRY(chosenBackend(choice))) {
    case Backend::Lists: return openListsSession(weights);
    case Backend::GpuHost: return openGpuHostSession(weights);
    case Backend::GpuCuda: return openGpuCudaSession(weights);
    case Backend::GpuOpenCl: return openGpuOpenClSession(weights);
    case Backend::Fast: break;
  }
  auto session = openFastSession(weights, choice.products == "tf32");
  // Only the device's own advice is reworded; every other failure is its own.
  if (!session.ok() && session.error().message.find("OSPREY_GPU=host") != std::string::npos)
    return gpt2::fastRefusal(session.error());
  return session;
}

}  // namespace osprey::python
