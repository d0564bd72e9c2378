// Reading and writing Hugging Face GPT-2 config.json files (see checkpoint_config.hpp).
#include "gpt2/checkpoint/config.hpp"
#include "osprey/io/input_file.hpp"
#include "osprey/io/json_text.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpt2 {
namespace {

using Json = nlohmann::json;

osprey::Error configError(const std::string& label, const std::string& problem) {
  return osprey::Error{fmt::format("{}: {}", label, problem)};
}

// A required positive integer field (or its older alias).
osprey::Result<Index> integerField(const Json& j, const std::string& label, const char* name,
                                   const char* alias = nullptr) {
  const char* used = name;
  auto it = j.find(name);
  if (it == j.end() && alias) {
    it = j.find(alias);
    used = alias;
  }
  if (it == j.end())
    return configError(label, alias ? fmt::format("field `{}` (or `{}`) missing", name, alias)
                                    : fmt::format("field `{}` missing", name));
  if (!it->is_number_integer())
    return configError(label, fmt::format("field `{}` must be an integer, not {}", used, it->dump()));
  return it->get<Index>();
}

}  // namespace

osprey::Result<Config> parseHfConfig(std::string_view text, const std::string& label) {
  // The checked reader: a number beyond double's range or a key given twice is an error naming it.
  const Json j = OSPREY_TRY(osprey::io::parseJson(text, label));
  if (!j.is_object()) return configError(label, "not a JSON object");

  Config c;
  c.maxT = OSPREY_TRY(integerField(j, label, "n_positions", "n_ctx"));
  c.V = OSPREY_TRY(integerField(j, label, "vocab_size"));
  c.L = OSPREY_TRY(integerField(j, label, "n_layer"));
  c.NH = OSPREY_TRY(integerField(j, label, "n_head"));
  c.C = OSPREY_TRY(integerField(j, label, "n_embd"));
  if (auto problem = configProblem(c)) return configError(label, *problem);

  // The fields that would change the computation: each must be absent or GPT-2's value.
  if (auto it = j.find("model_type"); it != j.end() && *it != "gpt2")
    return configError(label, fmt::format("model_type is {}, expected \"gpt2\"", it->dump()));
  if (auto it = j.find("layer_norm_epsilon"); it != j.end()) {
    if (!it->is_number() || it->get<double>() != kLayerNormEpsilon)
      return configError(label, fmt::format("layer_norm_epsilon is {}; Osprey's GPT-2 uses 1e-05",
                                            it->dump()));
  }
  if (auto it = j.find("activation_function"); it != j.end()) {
    // gelu_new and gelu_pytorch_tanh are the same function (GELU's tanh form).
    if (*it != "gelu_new" && *it != "gelu_pytorch_tanh")
      return configError(label, fmt::format("activation_function is {}; Osprey's GPT-2 uses "
                                            "\"gelu_new\" (GELU, tanh form)", it->dump()));
  }
  if (auto it = j.find("n_inner"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<Index>() != 4 * c.C)
      return configError(label, fmt::format("n_inner is {}; Osprey's GPT-2 uses 4 * n_embd = {}",
                                            it->dump(), 4 * c.C));
  }
  if (auto it = j.find("tie_word_embeddings"); it != j.end() && *it != true)
    return configError(label, "tie_word_embeddings is false; Osprey's GPT-2 ties lm_head to wte");
  if (auto it = j.find("add_cross_attention"); it != j.end() && *it == true)
    return configError(label, "add_cross_attention is true; Osprey's GPT-2 has no cross-attention");
  if (auto it = j.find("scale_attn_weights"); it != j.end() && *it == false)
    return configError(label, "scale_attn_weights is false; Osprey's GPT-2 scales by 1/sqrt(head size)");
  if (auto it = j.find("scale_attn_by_inverse_layer_idx"); it != j.end() && *it == true)
    return configError(label, "scale_attn_by_inverse_layer_idx is true; Osprey's GPT-2 does not "
                              "scale attention by the layer index");
  return c;
}

osprey::Result<Config> readHfConfig(const std::filesystem::path& path) {
  const std::string text = OSPREY_TRY(osprey::io::readWholeFile(path.string(), std::uint64_t{1} << 24));
  return parseHfConfig(text, path.string());
}

std::string hfConfigText(const Config& c) {
  // ordered_json keeps the fields in the order written here, so the file is stable.
  nlohmann::ordered_json j;
  j["activation_function"] = "gelu_new";
  j["architectures"] = {"GPT2LMHeadModel"};
  j["attn_pdrop"] = 0.1;
  j["bos_token_id"] = kEndOfText;
  j["embd_pdrop"] = 0.1;
  j["eos_token_id"] = kEndOfText;
  j["initializer_range"] = kInitializerRange;
  j["layer_norm_epsilon"] = kLayerNormEpsilon;
  j["model_type"] = "gpt2";
  j["n_ctx"] = c.maxT;
  j["n_embd"] = c.C;
  j["n_head"] = c.NH;
  j["n_inner"] = nullptr;
  j["n_layer"] = c.L;
  j["n_positions"] = c.maxT;
  j["reorder_and_upcast_attn"] = false;
  j["resid_pdrop"] = 0.1;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["scale_attn_weights"] = true;
  j["summary_activation"] = nullptr;
  j["summary_first_dropout"] = 0.1;
  j["summary_proj_to_labels"] = true;
  j["summary_type"] = "cls_index";
  j["summary_use_proj"] = true;
  j["tie_word_embeddings"] = true;
  j["use_cache"] = true;
  j["vocab_size"] = c.V;
  return j.dump(2) + "\n";
}

}  // namespace gpt2
