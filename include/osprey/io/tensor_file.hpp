// Reading one named tensor from a checkpoint file, as float64 host values.
//
// This is what the effect's `load(path, name)` answers with on every handler: the handler reads
// host values here and lifts them. Safetensors files (F64/F32/F16/BF16) and llm.c `.bin`
// checkpoints (by GPT-2 parameter name) are recognised by their contents, not their names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace osprey::io {

struct TensorData {
  std::vector<Index> shape;     // e.g. {768, 2304}
  std::vector<Scalar> values;   // row-major, converted to float64 exactly
};

// One tensor; errors name the file and the problem ("…/model.safetensors: no tensor named `x`").
Result<TensorData> readTensor(const std::string& path, const std::string& name);

}  // namespace osprey::io
