// Loading GPT-2 checkpoints (see load.hpp).
#include "gpt2/checkpoint/load.hpp"

#include <set>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpt2/checkpoint/config.hpp"
#include "gpt2/model/finite_weights.hpp"
#include "osprey/io/tensor_file.hpp"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "transformer.";

std::string shapeText(const std::vector<Index>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

// The name under which `file` holds parameter `name`: bare (openai-community/gpt2's own
// spelling) or with the `transformer.` prefix (what save_pretrained writes); both is ambiguous.
osprey::Result<std::string> storedName(const osprey::io::TensorFile& file, const std::string& name) {
  const bool bare = file.contains(name), prefixed = file.contains(kPrefix + name);
  if (bare && prefixed)
    return osprey::Error{fmt::format("{}: holds both `{}` and `{}{}`; which one is meant is unclear",
                                     file.path(), name, kPrefix, name)};
  if (bare) return name;
  if (prefixed) return std::string(kPrefix) + name;
  return osprey::Error{fmt::format("{}: tensor `{}` is missing", file.path(), name)};
}

// lm_head.weight, when present, must be wte itself: Osprey's output projection is tied.
osprey::Result<void> checkTiedHead(const osprey::io::TensorFile& file, const HostWeights& w) {
  for (const std::string& name : {std::string("lm_head.weight"), std::string(kPrefix) + "lm_head.weight"}) {
    if (!file.contains(name)) continue;
    auto head = OSPREY_TRY(file.read(name));
    if (head.values != w.wte().values)
      return osprey::Error{fmt::format(
          "{}: `{}` differs from wte.weight; Osprey's GPT-2 ties the output projection to the token "
          "embedding (tie_word_embeddings), so an untied lm_head cannot be loaded",
          file.path(), name)};
  }
  return {};
}

// Every tensor of the file is one the config asks for, the tied lm head, or one of the attention
// mask buffers older Hugging Face checkpoints store (`h.N.attn.bias`, `h.N.attn.masked_bias`,
// constants GPT-2 recomputes). Anything else (a block beyond n_layer, a stray tensor) would be
// silently dropped, and a save would then write a different model: an error naming it.
osprey::Result<void> checkNoExtraTensors(const osprey::io::TensorFile& file, const Config& config) {
  std::set<std::string> known{"lm_head.weight"};
  for (const ParameterSpec& spec : parameterSpecs(config)) known.insert(spec.name);
  const std::string prefix = kPrefix;
  for (const std::string& stored : file.names()) {
    const std::string name = stored.rfind(prefix, 0) == 0 ? stored.substr(prefix.size()) : stored;
    if (known.count(name)) continue;
    const bool maskBuffer = name.rfind("h.", 0) == 0 &&
                            (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
    if (maskBuffer && known.count(name.substr(0, name.find(".attn.")) + ".attn.c_attn.weight")) continue;
    return osprey::Error{fmt::format(
        "{}: tensor `{}` is not part of the model its config describes ({} blocks, width {}): the "
        "checkpoint and its config disagree",
        file.path(), stored, config.L, config.C)};
  }
  return {};
}

// A model holding NaN or an infinity makes every logit NaN or ±inf, and greedy decoding would then
// print a token chosen from nonsense with success: refused on load, on every backend alike, naming
// the first bad element. (A training checkpoint has its own check, which names the moments too.)
osprey::Result<void> checkFiniteWeights(const HostWeights& w, const std::string& path) {
  if (const auto bad = firstNonFinite(w))
    return osprey::Error{fmt::format("{}: {}: the weights must be finite numbers (a model holding NaN or "
                                     "infinity computes no meaningful logits)",
                                     path, *bad)};
  return {};
}

}  // namespace

osprey::Result<HostWeights> loadWeightsFile(const std::string& path, const Config& config) {
  auto file = OSPREY_TRY(osprey::io::TensorFile::open(path));
  HostWeights w{config, {}};
  for (const ParameterSpec& spec : parameterSpecs(config)) {
    const std::string name = OSPREY_TRY(storedName(file, spec.name));
    auto info = OSPREY_TRY(file.info(name));
    if (info.shape != spec.shape)
      return osprey::Error{fmt::format("{}: tensor `{}` has shape {}, expected {}", path, name,
                                       shapeText(info.shape), shapeText(spec.shape))};
    auto data = OSPREY_TRY(file.read(name));
    w.tensors.push_back(HostTensor{std::move(data.values)});
  }
  OSPREY_CHECK(checkShapes(w, path));
  if (!file.isLlmc()) {
    OSPREY_CHECK(checkTiedHead(file, w));
    OSPREY_CHECK(checkNoExtraTensors(file, config));
  }
  return w;
}

osprey::Result<LoadedCheckpoint> loadCheckpoint(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path configPath = path / "config.json", weightsPath = path / "model.safetensors";
    if (!fs::exists(configPath, ec))
      return osprey::Error{fmt::format("{}: not a Hugging Face GPT-2 directory (no config.json)",
                                       path.string())};
    if (!fs::exists(weightsPath, ec))
      return osprey::Error{fmt::format(
          "{}: no model.safetensors (only safetensors weights are read; convert pytorch_model.bin "
          "with transformers' save_pretrained(..., safe_serialization=True))",
          path.string())};
    const Config config = OSPREY_TRY(readHfConfig(configPath));
    auto weights = OSPREY_TRY(loadWeightsFile(weightsPath.string(), config));
    OSPREY_CHECK(checkFiniteWeights(weights, weightsPath.string()));
    return LoadedCheckpoint{std::move(weights), path.string(), path};
  }
  if (!fs::exists(path, ec))
    return osprey::Error{fmt::format("{}: no such file or directory", path.string())};

  // A single file: an llm.c checkpoint carries its config in its header.
  auto file = OSPREY_TRY(osprey::io::TensorFile::open(path.string()));
  if (!file.isLlmc())
    return osprey::Error{fmt::format("{}: a safetensors file on its own has no config; give the "
                                     "model directory that holds it and its config.json",
                                     path.string())};
  auto llmc = OSPREY_TRY(osprey::io::LlmcCheckpoint::open(path.string()));
  const auto& lc = llmc.config();
  const Config config{lc.maxT, lc.V, lc.L, lc.NH, lc.C};
  if (auto problem = configProblem(config))
    return osprey::Error{fmt::format("{}: {}", path.string(), *problem)};
  auto weights = OSPREY_TRY(loadWeightsFile(path.string(), config));
  OSPREY_CHECK(checkFiniteWeights(weights, path.string()));
  return LoadedCheckpoint{std::move(weights), path.string(), std::nullopt};
}

}  // namespace gpt2
