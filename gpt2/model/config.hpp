// gpt2::Config: the five numbers that fix a GPT-2's shapes, and the presets Osprey ships.
//
// Dimension legend used by every GPT-2 file (after llm.c):
//   maxT = context length (positions)   V  = vocabulary size
//   L    = number of transformer blocks NH = attention heads per block
//   C    = channels (the model width)   hs = C / NH (one head's width)
//   T    = tokens in the current sequence (T <= maxT)
//
// The fixed architecture facts GPT-2 does not parameterise (LayerNorm eps 1e-5, GELU in its tanh
// form, tied input/output embedding, learned positions) live here as constants, so a checkpoint
// claiming anything else is refused where it is read (checkpoint_hf.cpp), not half-honoured.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "osprey/config.hpp"

namespace gpt2 {

using osprey::Index;
using osprey::Scalar;

// LayerNorm's epsilon in every GPT-2 checkpoint.
inline constexpr Scalar kLayerNormEpsilon = 1e-5;
// Standard deviation of GPT-2's normal initialisation (HF GPT2Config.initializer_range).
inline constexpr Scalar kInitializerRange = 0.02;
// <|endoftext|>: GPT-2's only special token, its BOS and EOS.
inline constexpr Index kEndOfText = 50256;

struct Config {
  Index maxT = 0;  // context length
  Index V = 0;     // vocabulary size
  Index L = 0;     // transformer blocks
  Index NH = 0;    // heads per block
  Index C = 0;     // channels

  friend bool operator==(const Config&, const Config&) = default;
};

// The 124M model OpenAI released (and Osprey's default shape).
inline constexpr Config kGpt2_124M{1024, 50257, 12, 12, 768};
// A 2-block, width-64 model with the full vocabulary: the same code paths, for fast tests.
inline constexpr Config kGpt2Tiny{128, 50257, 2, 2, 64};

// "124M" | "tiny" -> the preset, else nothing.
inline std::optional<Config> presetNamed(std::string_view name) {
  if (name == "124M") return kGpt2_124M;
  if (name == "tiny") return kGpt2Tiny;
  return std::nullopt;
}

// Parameter tensors: wte, wpe, 12 per block, ln_f weight and bias (148 for 12 blocks).
inline constexpr Index parameterTensorCount(const Config& c) { return 2 + 12 * c.L + 2; }

// Number of scalar parameters (124,439,808 for 124M). Checked by the caller's sanity of the
// config (validateConfig), so plain arithmetic cannot overflow here.
inline constexpr Index parameterCount(const Config& c) {
  const Index perBlock = 2 * c.C                     // ln_1
                         + c.C * 3 * c.C + 3 * c.C   // attn.c_attn
                         + c.C * c.C + c.C           // attn.c_proj
                         + 2 * c.C                   // ln_2
                         + c.C * 4 * c.C + 4 * c.C   // mlp.c_fc
                         + 4 * c.C * c.C + c.C;      // mlp.c_proj
  return c.V * c.C + c.maxT * c.C + c.L * perBlock + 2 * c.C;
}

// The name a run is announced with: the preset it matches, else its size in millions of
// parameters ("355M"), as GPT-2's sizes are usually named.
inline std::string sizeLabel(const Config& c) {
  if (c == kGpt2_124M) return "124M";
  if (c == kGpt2Tiny) return "tiny";
  const Index millions = (parameterCount(c) + 500000) / 1000000;
  return std::to_string(millions) + "M";
}

// Why a config cannot be a GPT-2 Osprey runs, or nothing. Limits keep every index product of the
// model (and parameterCount) far inside int64.
inline std::optional<std::string> configProblem(const Config& c) {
  constexpr Index kLimit = 1 << 20;
  if (c.maxT < 1 || c.maxT > kLimit) return "n_positions must be between 1 and 1048576";
  if (c.V < 1 || c.V > 4 * kLimit) return "vocab_size must be between 1 and 4194304";
  if (c.L < 1 || c.L > 1024) return "n_layer must be between 1 and 1024";
  if (c.C < 1 || c.C > 65536) return "n_embd must be between 1 and 65536";
  if (c.NH < 1 || c.C % c.NH != 0) return "n_head must be positive and divide n_embd";
  return std::nullopt;
}

}  // namespace gpt2
