// Saving GPT-2 weights as a Hugging Face model directory that transformers'
// GPT2LMHeadModel.from_pretrained(DIR) and `osprey-gpt2 --model DIR` both load unchanged:
//
//   model.safetensors  the 2 + 12·L + 2 tensors, names without `transformer.` (the spelling of
//                      openai-community/gpt2's own file), Conv1D layout, F32 (or F64 / BF16);
//                      lm_head is not stored: it is tied to wte
//   vocab.json, merges.txt   the tokenizer, copied (OpenAI's encoder.json / vocab.bpe are the
//                      same files and are copied under the Hugging Face names)
//   config.json        written last, so a directory with a config.json is complete
//
// Each file is written atomically (temporary file, fsync, rename): an interrupted save leaves
// the previous files whole.
#pragma once

#include <filesystem>

#include "gpt2/model/weights.hpp"
#include "osprey/io/dtype.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

osprey::Result<void> saveHfDirectory(const std::filesystem::path& dir, const HostWeights& weights,
                                     osprey::io::DType dtype,
                                     const std::filesystem::path& tokenizerDir);

}  // namespace gpt2
