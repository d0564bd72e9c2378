// GPT-2's parameter names and shapes in the fixed order weights.hpp documents.
#include "gpt2/model/weights.hpp"

namespace gpt2 {

std::vector<ParameterSpec> parameterSpecs(const Config& c) {
  std::vector<ParameterSpec> specs;
  specs.reserve(static_cast<std::size_t>(parameterTensorCount(c)));
  specs.push_back({"wte.weight", {c.V, c.C}});
  specs.push_back({"wpe.weight", {c.maxT, c.C}});
  for (Index l = 0; l < c.L; ++l) {
    const std::string h = fmt::format("h.{}.", l);
    specs.push_back({h + "ln_1.weight", {c.C}});
    specs.push_back({h + "ln_1.bias", {c.C}});
    specs.push_back({h + "attn.c_attn.weight", {c.C, 3 * c.C}});
    specs.push_back({h + "attn.c_attn.bias", {3 * c.C}});
    specs.push_back({h + "attn.c_proj.weight", {c.C, c.C}});
    specs.push_back({h + "attn.c_proj.bias", {c.C}});
    specs.push_back({h + "ln_2.weight", {c.C}});
    specs.push_back({h + "ln_2.bias", {c.C}});
    specs.push_back({h + "mlp.c_fc.weight", {c.C, 4 * c.C}});
    specs.push_back({h + "mlp.c_fc.bias", {4 * c.C}});
    specs.push_back({h + "mlp.c_proj.weight", {4 * c.C, c.C}});
    specs.push_back({h + "mlp.c_proj.bias", {c.C}});
  }
  specs.push_back({"ln_f.weight", {c.C}});
  specs.push_back({"ln_f.bias", {c.C}});
  return specs;
}

osprey::Result<void> checkShapes(const HostWeights& w, const std::string& source) {
  const auto specs = parameterSpecs(w.config);
  if (w.tensors.size() != specs.size())
    return osprey::Error{fmt::format("{}: {} parameter tensors, expected {}", source,
                                     w.tensors.size(), specs.size())};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto have = static_cast<Index>(w.tensors[i].values.size());
    if (have != specs[i].elements())
      return osprey::Error{fmt::format("{}: tensor `{}` has {} values, expected {}", source,
                                       specs[i].name, have, specs[i].elements())};
  }
  return {};
}

}  // namespace gpt2
