// Not writing a model over one that is already there: `init --out DIR` refuses a DIR that holds
// a model or a checkpoint (config.json, model.safetensors, trainer_state.json) or a training run
// (checkpoint/, loss.csv) unless --overwrite says to replace it. A mistyped --out costs an
// error message, not a trained model.
#pragma once

#include <filesystem>
#include <optional>

#include "osprey/result.hpp"

namespace gpt2 {

// The first of those files in dir, or nullopt (also when dir does not exist).
std::optional<std::filesystem::path> existingModelFile(const std::filesystem::path& dir);

// An error naming the file found and the option that allows replacing it.
osprey::Result<void> refuseToReplaceModel(const std::filesystem::path& dir, const char* option = "--out");

}  // namespace gpt2
