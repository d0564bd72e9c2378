// Reading one named tensor from a checkpoint file, as float64 host values.
//
// This is what the effect's `load(path, name)` answers with on every handler: the handler reads
// host values here and lifts them. Safetensors files (F64/F32/F16/BF16) and llm.c `.bin`
// checkpoints (by GPT-2 parameter name) are recognised by their contents, not their names; a
// directory stands for the `model.safetensors` inside it (a Hugging Face model directory).
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "osprey/config.hpp"
#include "osprey/io/llmc_checkpoint.hpp"
#include "osprey/io/safetensors.hpp"
#include "osprey/io/tensor_data.hpp"
#include "osprey/result.hpp"

namespace osprey::io {

// Either kind of checkpoint, opened once: the header is read on open, each read() fetches one
// tensor. Use it to load many tensors from one file; readTensor opens the file afresh each call.
class TensorFile {
 public:
  static Result<TensorFile> open(const std::string& path);

  const std::string& path() const;
  bool isLlmc() const { return std::holds_alternative<LlmcCheckpoint>(m_file); }
  std::vector<std::string> names() const;
  bool contains(std::string_view name) const;
  Result<TensorInfo> info(std::string_view name) const;
  Result<TensorData> read(std::string_view name) const;

 private:
  explicit TensorFile(SafetensorsFile file) : m_file(std::move(file)) {}
  explicit TensorFile(LlmcCheckpoint file) : m_file(std::move(file)) {}

  std::variant<SafetensorsFile, LlmcCheckpoint> m_file;
};

// One tensor; errors name the file and the problem ("…/model.safetensors: no tensor named `x`").
Result<TensorData> readTensor(const std::string& path, const std::string& name);

}  // namespace osprey::io
