// Loading GPT-2 weights from a checkpoint into the host record (weights.hpp).
//
// Two kinds of checkpoint are read:
//   * a Hugging Face model directory: config.json + model.safetensors (F32, F16, BF16 or F64),
//     tensor names with or without the `transformer.` prefix; lm_head.weight may be absent or
//     equal to wte.weight (GPT-2 ties them), a different lm_head is refused;
//   * an llm.c checkpoint (`gpt2_124M.bin`, float32 or bfloat16), whose header holds the config.
// Every tensor must be there with exactly its GPT-2 shape, and (loadCheckpoint) every weight a
// finite number; errors name the file and the tensor.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "gpt2/model/weights.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

struct LoadedCheckpoint {
  HostWeights weights;
  std::string source;                                // what was read, for messages
  std::optional<std::filesystem::path> directory;    // the model directory (for its tokenizer)
};

// A model directory or an llm.c .bin file, told apart by what `path` is.
osprey::Result<LoadedCheckpoint> loadCheckpoint(const std::filesystem::path& path);

// The 2 + 12·L + 2 tensors of `config` from one weights file (safetensors or llm.c), checked
// against their shapes. `path` names the file in errors.
osprey::Result<HostWeights> loadWeightsFile(const std::string& path, const Config& config);

}  // namespace gpt2
