// Saving GPT-2 weights as an llm.c checkpoint (osprey/io/llmc_checkpoint.hpp): the version-3
// float32 file that llm.c's train_gpt2.c and train_gpt2.cu load (gpt2_build_from_checkpoint), or
// version 5 (bfloat16) for train_gpt2.cu. The vocabulary is padded to a multiple of 128 as llm.c
// pads it (50257 -> 50304), with zero rows. Float32 weights are written exactly, so reading the
// file back gives the same doubles; wider ones are rounded to the nearest float32 (or bfloat16)
// and the count of values that changed is returned, for the caller to say so.
#pragma once

#include <cstdint>
#include <filesystem>

#include "gpt2/model/weights.hpp"
#include "osprey/io/dtype.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

// llm.c's padded vocabulary: V rounded up to a multiple of 128.
osprey::Index llmcPaddedVocab(osprey::Index V);

// Writes `weights` to `path` (atomically). Returns how many values the dtype could not hold exactly.
osprey::Result<std::uint64_t> saveLlmcCheckpoint(const std::filesystem::path& path, const HostWeights& weights,
                                                 osprey::io::DType dtype = osprey::io::DType::F32);

}  // namespace gpt2
