// A Hugging Face GPT-2 `config.json`: read into a gpt2::Config (refusing anything that is not the
// GPT-2 Osprey computes), and written for a model directory transformers loads unchanged.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "gpt2/model/config.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

// The config in `path` (a config.json). Reads n_positions (or the older n_ctx), vocab_size,
// n_layer, n_head, n_embd; refuses, naming the file and field, a model that is not GPT-2 as
// Osprey computes it: layer_norm_epsilon other than 1e-5, an activation other than gelu_new
// (tanh GELU), n_inner other than 4·n_embd, untied embeddings, cross-attention, a model_type
// other than gpt2, or attention scaled by the layer index.
osprey::Result<Config> readHfConfig(const std::filesystem::path& path);

// The same from the file's text; `label` names it in errors.
osprey::Result<Config> parseHfConfig(std::string_view json, const std::string& label);

// config.json for `c`: HF GPT2Config's fields (architectures ["GPT2LMHeadModel"], model_type
// "gpt2", activation_function "gelu_new", layer_norm_epsilon 1e-5, bos/eos 50256, tied
// embeddings, no dropout at inference...), pretty-printed, ending in a newline.
std::string hfConfigText(const Config& c);

}  // namespace gpt2
