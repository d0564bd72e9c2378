// llm.c GPT-2 checkpoints (`gpt2_124M.bin` float32, `gpt2_124M_bf16.bin` bfloat16), read and
// written as Hugging Face GPT-2 tensors.
//
// File: a header of 256 little-endian int32 {magic 20240326, version (3 = float32, 5 = bfloat16),
// maxT, V, L, NH, C, Vp, zeros...}, then every parameter in llm.c's order (llmc_layout.hpp).
// The reader answers Hugging Face names and layouts ("h.0.attn.c_attn.weight" as (C, 3C)), so a
// model loads the same way from either kind of checkpoint. The header is checked (magic,
// version, dimensions) and so is the file length against it, before anything is read.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "osprey/io/dtype.hpp"
#include "osprey/io/input_file.hpp"
#include "osprey/io/llmc_layout.hpp"
#include "osprey/io/safetensors.hpp"
#include "osprey/io/tensor_data.hpp"
#include "osprey/result.hpp"

namespace osprey::io {

class LlmcCheckpoint {
 public:
  static Result<LlmcCheckpoint> open(const std::string& path);

  const std::string& path() const { return m_file.path(); }
  const LlmcConfig& config() const { return m_config; }
  int version() const { return m_version; }
  DType dtype() const { return m_version == kLlmcVersionBF16 ? DType::BF16 : DType::F32; }

  std::vector<std::string> names() const { return llmcTensorNames(m_config); }
  bool contains(std::string_view name) const { return llmcSlice(m_config, name).has_value(); }
  // Hugging Face shape; [begin, end) is the byte range read, within the parameter section.
  Result<TensorInfo> info(std::string_view name) const;
  // Hugging Face layout (transposed where llm.c differs), widened to float64 exactly.
  Result<TensorData> read(std::string_view name) const;

 private:
  LlmcCheckpoint(InputFile file, LlmcConfig config, int version)
      : m_file(std::move(file)), m_config(config), m_version(version) {}

  InputFile m_file;
  LlmcConfig m_config;
  int m_version = kLlmcVersionF32;
};

// Writes an llm.c checkpoint (atomically) from Hugging Face-named, Hugging Face-shaped tensors:
// every name of llmcTensorNames(config) must be present with its shape. `dtype` is F32 (version 3)
// or BF16 (version 5); wte's padding rows (V..Vp) are written as zeros, as llm.c does.
Result<void> writeLlmcCheckpoint(const std::string& path, const LlmcConfig& config,
                                 const std::map<std::string, TensorData>& tensors, DType dtype = DType::F32);

}  // namespace osprey::io
