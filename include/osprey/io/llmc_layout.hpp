// Where each GPT-2 parameter lives in an llm.c checkpoint, and how it maps to Hugging Face.
//
// Legend: maxT = context length, V = vocabulary, Vp = V padded (llm.c pads wte's rows to a
// multiple of 128), L = layers, NH = heads, C = channels.
//
// llm.c stores 16 blocks, one after another, in this order (shapes as llm.c holds them):
//   wte (Vp, C)  wpe (maxT, C)  ln1w (L, C)  ln1b (L, C)  qkvw (L, 3C, C)  qkvb (L, 3C)
//   attprojw (L, C, C)  attprojb (L, C)  ln2w (L, C)  ln2b (L, C)  fcw (L, 4C, C)  fcb (L, 4C)
//   fcprojw (L, C, 4C)  fcprojb (L, C)  lnfw (C)  lnfb (C)
// Its matrices are nn.Linear (out, in); Hugging Face GPT-2 uses Conv1D, (in, out), so the four
// weight matrices are transposed on the way in and out, and wte's padding rows are dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace osprey::io {

inline constexpr std::int32_t kLlmcMagic = 20240326;
inline constexpr std::int32_t kLlmcVersionF32 = 3;
inline constexpr std::int32_t kLlmcVersionBF16 = 5;
inline constexpr std::uint64_t kLlmcHeaderInts = 256;
inline constexpr std::uint64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;

struct LlmcConfig {
  Index maxT = 0;  // context length, e.g. 1024
  Index V = 0;     // vocabulary, e.g. 50257
  Index L = 0;     // layers, e.g. 12
  Index NH = 0;    // heads, e.g. 12
  Index C = 0;     // channels, e.g. 768
  Index Vp = 0;    // padded vocabulary, e.g. 50304
};

// Every dimension positive and within sane limits, Vp >= V, C divisible by NH.
// `label` names the file in errors.
Result<void> checkLlmcConfig(const std::string& label, const LlmcConfig& config);

// One Hugging Face tensor's place in the llm.c parameter section.
struct LlmcSlice {
  std::vector<Index> hfShape;    // e.g. {768, 2304} for h.0.attn.c_attn.weight
  std::uint64_t firstElement;    // offset (in elements) from the start of the parameter section
  std::uint64_t elementCount;    // elements read (for wte: V * C, the padding rows skipped)
  bool transposed;               // llm.c holds it as (hfShape[1], hfShape[0])
};

// The slice for `name` ("wte.weight", "h.3.mlp.c_fc.bias", ...), or nullopt for an unknown name.
std::optional<LlmcSlice> llmcSlice(const LlmcConfig& config, std::string_view name);

// The Hugging Face names, in llm.c's block order within each layer: wte, wpe, h.0.*, ..., ln_f.
// 2 + 12 L + 2 names (148 for L = 12).
std::vector<std::string> llmcTensorNames(const LlmcConfig& config);

// All parameters of the file, in elements (Vp * C + maxT * C + L * (12 C^2 + 13 C) + 2 C).
std::uint64_t llmcParameterCount(const LlmcConfig& config);

}  // namespace osprey::io
