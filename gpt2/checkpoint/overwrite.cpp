// See overwrite.hpp.
#include "gpt2/checkpoint/overwrite.hpp"

#include <fmt/format.h>

namespace fs = std::filesystem;

namespace gpt2 {

std::optional<fs::path> existingModelFile(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"config.json", "model.safetensors", "trainer_state.json", "checkpoint", "loss.csv"})
    if (fs::exists(dir / name, ec)) return dir / name;
  return std::nullopt;
}

osprey::Result<void> refuseToReplaceModel(const fs::path& dir, const char* option) {
  if (const auto found = existingModelFile(dir))
    return osprey::Error{fmt::format("{} {}: already holds a model ({}); give --overwrite to replace it, or "
                                     "choose another directory",
                                     option, dir.string(), found->string())};
  return {};
}

}  // namespace gpt2
