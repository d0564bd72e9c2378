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

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The four sizes OpenAI released, as Hugging Face's config.json files give them (n_positions
// 1024, vocab_size 50257; head size 64 in each): 124M is Osprey's default shape.
inline constexpr Config kGpt2_124M{1024, 50257, 12, 12, 768};     // gpt2
inline constexpr Config kGpt2_350M{1024, 50257, 24, 16, 1024};    // gpt2-medium
inline constexpr Config kGpt2_774M{1024, 50257, 36, 20, 1280};    // gpt2-large
inline constexpr Config kGpt2_1558M{1024, 50257, 48, 25, 1600};   // gpt2-xl
// A 2-block, width-64 model with the full vocabulary: the same code paths, for fast tests.
inline constexpr Config kGpt2Tiny{128, 50257, 2, 2, 64};

// A preset as users name it: by its size (llm.c's and nanoGPT's "350M") or by its Hugging Face
// model name ("gpt2-medium", also as "openai-community/gpt2-medium"); tiny has no hub name.
struct Preset {
  std::string_view name;     // "350M": the run's label
  std::string_view hubName;  // "gpt2-medium", or empty
  Config config;
};
inline constexpr std::array<Preset, 5> kPresets{{
    {"124M", "gpt2", kGpt2_124M},
    {"350M", "gpt2-medium", kGpt2_350M},
    {"774M", "gpt2-large", kGpt2_774M},
    {"1558M", "gpt2-xl", kGpt2_1558M},
    {"tiny", "", kGpt2Tiny},
}};

// The organisation the GPT-2 checkpoints live under on the Hugging Face hub.
inline constexpr std::string_view kHubOrganisation = "openai-community/";

// "350M" | "gpt2-medium" | "openai-community/gpt2-medium" | ... | "tiny" -> the preset, else nothing.
inline const Preset* presetEntry(std::string_view name) {
  if (name.starts_with(kHubOrganisation)) {
    name.remove_prefix(kHubOrganisation.size());
    if (name.empty()) return nullptr;
    for (const Preset& p : kPresets)
      if (name == p.hubName) return &p;
    return nullptr;
  }
  for (const Preset& p : kPresets)
    if (name == p.name || (!p.hubName.empty() && name == p.hubName)) return &p;
  return nullptr;
}
inline std::optional<Config> presetNamed(std::string_view name) {
  if (const Preset* p = presetEntry(name)) return p->config;
  return std::nullopt;
}

// Every name presetNamed takes, sizes first ("124M", ..., "tiny", "gpt2", ..., "gpt2-xl"; the
// "openai-community/" forms aside): what a --preset option lists.
inline std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  for (const Preset& p : kPresets)
    if (!p.hubName.empty()) names.emplace_back(p.hubName);
  return names;
}

// The presets for a message or a --help line: "124M (gpt2), 350M (gpt2-medium), 774M
// (gpt2-large), 1558M (gpt2-xl) or tiny".
inline std::string presetChoices() {
  std::string text;
  for (std::size_t i = 0; i < kPresets.size(); ++i) {
    const Preset& p = kPresets[i];
    if (i > 0) text += i + 1 == kPresets.size() ? " or " : ", ";
    text += p.name;
    if (!p.hubName.empty()) text += std::string(" (") + std::string(p.hubName) + ")";
  }
  return text;
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

// The name a run is announced with: the preset it matches ("350M" for GPT-2 medium, as llm.c
// names it), else its size in millions of parameters ("65M": 350M's shape with one block), as
// GPT-2's sizes are usually named.
inline std::string sizeLabel(const Config& c) {
  for (const Preset& p : kPresets)
    if (c == p.config) return std::string(p.name);
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
