// The first NaN or infinity in a host copy of the weights, named: what a load refuses (a model
// whose weights are not finite makes every logit NaN or ±inf, and generate would print a token
// chosen from nonsense) and what a save refuses (train/checkpoint.cpp).
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "gpt2/model/weights.hpp"

namespace gpt2 {

// "h.0.attn.c_attn.weight[17] is nan", for the first bad element, or nullopt. `prefix` goes
// before the tensor's name ("m." for the first moments).
inline std::optional<std::string> firstNonFinite(const HostWeights& w, const std::string& prefix = "") {
  const auto specs = parameterSpecs(w.config);
  for (std::size_t t = 0; t < w.tensors.size() && t < specs.size(); ++t) {
    const auto& values = w.tensors[t].values;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        return fmt::format("{}{}[{}] is {}", prefix, specs[t].name, i, std::isnan(values[i]) ? "nan" :
                           values[i] > 0 ? "inf" : "-inf");
  }
  return std::nullopt;
}

}  // namespace gpt2
