// GPT-2's initialisation (see init.hpp for the distributions and the stream layout).
#include "gpt2/model/init.hpp"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "gpt2/model/init_random.hpp"
#include "osprey/math.hpp"

namespace gpt2 {
namespace {

enum class InitKind { Normal, Zero, One };

// How parameter `name` starts, and the standard deviation when it is drawn.
std::pair<InitKind, Scalar> initOf(std::string_view name, const Config& c) {
  const auto endsWith = [name](std::string_view suffix) {
    return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  if (endsWith("ln_1.weight") || endsWith("ln_2.weight") || name == "ln_f.weight")
    return {InitKind::One, 0.0};
  if (endsWith(".bias")) return {InitKind::Zero, 0.0};
  if (endsWith("c_proj.weight"))
    return {InitKind::Normal,
            kInitializerRange / osprey::math::sqrt(2.0 * static_cast<Scalar>(c.L))};
  return {InitKind::Normal, kInitializerRange};
}

}  // namespace

HostWeights initialWeights(const Config& c, std::uint64_t seed) {
  const auto specs = parameterSpecs(c);
  HostWeights w{c, {}};
  w.tensors.resize(specs.size());

  // Work items: (tensor, chunk) pairs, filled in parallel; each writes only its own slice.
  struct Chunk {
    std::size_t tensor;
    Index first, count;
  };
  std::vector<Chunk> chunks;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const Index n = specs[k].elements();
    const auto [kind, stddev] = initOf(specs[k].name, c);
    w.tensors[k].values.assign(static_cast<std::size_t>(n), kind == InitKind::One ? 1.0 : 0.0);
    if (kind != InitKind::Normal) continue;
    for (Index first = 0; first < n; first += kInitChunk)
      chunks.push_back({k, first, std::min(kInitChunk, n - first)});
  }

#pragma omp parallel for schedule(dynamic, 4)
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& ch = chunks[i];
    const Scalar stddev = initOf(specs[ch.tensor].name, c).second;
    const std::uint64_t stream =
        (static_cast<std::uint64_t>(ch.tensor) << 32) | static_cast<std::uint64_t>(ch.first / kInitChunk);
    NormalStream rng(seed, stream);
    Scalar* out = w.tensors[ch.tensor].values.data() + ch.first;
    for (Index j = 0; j < ch.count; ++j) out[j] = stddev * rng.normal();
  }
  return w;
}

}  // namespace gpt2
