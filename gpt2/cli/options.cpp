// Options shared by several osprey-gpt2 subcommands.
#include "gpt2/cli/cli.hpp"

namespace gpt2 {

void addModelOptions(CLI::App& sub, ModelRequest& request) {
  sub.add_option("--model", request.model,
                 "Hugging Face GPT-2 directory (config.json + model.safetensors) or llm.c .bin "
                 "file; default: $OSPREY_GPT2, then the Hugging Face cache, then GPT-2's "
                 "initialisation");
  sub.add_option("--preset", request.preset, "a fresh initialisation of this shape: " + presetChoices())
      ->check(CLI::IsMember(presetNames()));
  sub.add_option("--seed", request.seed, "seed of the initialisation (when no checkpoint is read) and of generate's sampling")
      ->capture_default_str();
}

void addBackendOptions(CLI::App& sub, BackendChoice& choice) {
  sub.add_option("--backend", choice.backend, "handler: lists, gpu or fast (float storage on the cuda device)")->capture_default_str();
  sub.add_option("--device", choice.device, "gpu device: host, cuda or opencl (default: $OSPREY_GPU, else host)")
      ->check(CLI::Validator(
          [](std::string& name) { return name.empty() ? std::string("an empty device name: choose host, cuda or opencl") : ""; },
          "host, cuda or opencl"));
  sub.add_option("--products", choice.products,
                 "fast backend: the linear layers' products, bf16 operands (default) or tf32 on the floats")
      ->check(CLI::IsMember({"bf16", "tf32"}));
}

osprey::Result<Tokenizer> tokenizerFor(const std::optional<std::filesystem::path>& modelDir) {
  const auto dir = OSPREY_TRY(findTokenizerDir(modelDir));
  return Tokenizer::load(dir);
}

}  // namespace gpt2
