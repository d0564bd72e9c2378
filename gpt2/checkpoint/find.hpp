// Which GPT-2 a run uses, decided once, in this order:
//
//   1. --model PATH      a Hugging Face model directory or an llm.c .bin file; where no such path
//                        exists, a Hugging Face GPT-2 name ("gpt2-medium" or
//                        "openai-community/gpt2-medium", ... "gpt2-xl") is its snapshot in the
//                        cache below, and an error saying how to get it where there is none;
//   2. --preset NAME     a fresh GPT-2 initialisation of that shape (presetNamed: "124M",
//                        "350M", "774M", "1558M", their Hugging Face names "gpt2" ... "gpt2-xl",
//                        or "tiny");
//   3. $OSPREY_GPT2      the same kinds of path as --model;
//   4. the Hugging Face cache: <hub>/models--openai-community--gpt2 and <hub>/models--gpt2,
//      snapshot refs/main (else any snapshot) holding config.json + model.safetensors, where
//      <hub> is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub;
//   5. none of these: GPT-2's initialisation of the 124M shape with the seed, said plainly on
//      stderr (the output is then not meaningful text).
//
// A path that is given (1, 3) or found (4) but cannot be loaded is an error, never skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpt2/model/init.hpp"
#include "gpt2/model/weights.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

struct ModelRequest {
  std::optional<std::string> model;   // --model
  std::optional<std::string> preset;  // --preset
  std::uint64_t seed = kDefaultSeed;  // --seed (used only when initialising)
};

struct ChosenModel {
  HostWeights weights;
  std::string label;                               // "124M", "tiny", ...: the run's first line
  std::optional<std::filesystem::path> directory;  // a model directory (may hold the tokenizer)
  std::string notice;                              // for stderr; empty when a checkpoint was read
};

// The cache snapshot folders of a Hugging Face GPT-2 (openai-community/<hubName>, or its old name
// <hubName>) that would be tried, in order (whether or not they exist).
std::vector<std::filesystem::path> huggingFaceCacheDirs(std::string_view hubName = "gpt2");

osprey::Result<ChosenModel> chooseModel(const ModelRequest& request);

}  // namespace gpt2
