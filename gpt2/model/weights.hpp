// GPT-2's parameters: the 2 + 12·L + 2 tensors in one fixed, documented order, generic over what
// holds each tensor (a handler's Buffer, or a HostTensor on the host).
//
// Order and names are Hugging Face's, without the `transformer.` prefix (the spelling of
// openai-community/gpt2's own model.safetensors); matrices are in HF Conv1D layout (in, out),
// so `x · W` needs no transpose:
//
//   0  wte.weight                 (V, C)      token embedding, also the output projection (tied)
//   1  wpe.weight                 (maxT, C)   position embedding
//   then for each block l = 0..L-1, starting at index 2 + 12·l:
//   +0  h.{l}.ln_1.weight         (C)
//   +1  h.{l}.ln_1.bias           (C)
//   +2  h.{l}.attn.c_attn.weight  (C, 3C)    q | k | v, each C wide
//   +3  h.{l}.attn.c_attn.bias    (3C)
//   +4  h.{l}.attn.c_proj.weight  (C, C)
//   +5  h.{l}.attn.c_proj.bias    (C)
//   +6  h.{l}.ln_2.weight         (C)
//   +7  h.{l}.ln_2.bias           (C)
//   +8  h.{l}.mlp.c_fc.weight     (C, 4C)
//   +9  h.{l}.mlp.c_fc.bias       (4C)
//   +10 h.{l}.mlp.c_proj.weight   (4C, C)
//   +11 h.{l}.mlp.c_proj.bias     (C)
//   2 + 12·L      ln_f.weight     (C)
//   2 + 12·L + 1  ln_f.bias       (C)
//
// The same record holds gradients and optimiser moments (one tensor per parameter).
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpt2/model/config.hpp"
#include "osprey/effect.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

// The twelve tensors of one block, in their order within the block.
enum class BlockSlot : Index {
  Ln1Weight, Ln1Bias, AttnWeight, AttnBias, AttnProjWeight, AttnProjBias,
  Ln2Weight, Ln2Bias, FcWeight, FcBias, FcProjWeight, FcProjBias
};
inline constexpr Index kSlotsPerBlock = 12;

// Position of each tensor in the fixed order.
inline constexpr Index kWteIndex = 0;
inline constexpr Index kWpeIndex = 1;
inline constexpr Index blockTensorIndex(Index layer, BlockSlot slot) {
  return 2 + kSlotsPerBlock * layer + static_cast<Index>(slot);
}
inline constexpr Index lnfWeightIndex(const Config& c) { return 2 + kSlotsPerBlock * c.L; }
inline constexpr Index lnfBiasIndex(const Config& c) { return 2 + kSlotsPerBlock * c.L + 1; }

// One parameter's name and shape.
struct ParameterSpec {
  std::string name;           // e.g. "h.3.attn.c_attn.weight"
  std::vector<Index> shape;   // e.g. {768, 2304}
  Index elements() const {
    Index n = 1;
    for (Index d : shape) n *= d;
    return n;
  }
};

// Every parameter of a config, in the fixed order above.
std::vector<ParameterSpec> parameterSpecs(const Config& c);

// A tensor held on the host: what checkpoints are read into and written from.
struct HostTensor {
  std::vector<Scalar> values;  // row-major
};

// The parameters (or gradients, or moments) of one GPT-2, each tensor held by a Buffer.
template <class Buffer>
struct Weights {
  Config config;
  std::vector<Buffer> tensors;  // parameterTensorCount(config) tensors, in the fixed order

  const Buffer& wte() const { return tensors[kWteIndex]; }  // (V, C)
  const Buffer& wpe() const { return tensors[kWpeIndex]; }  // (maxT, C)
  const Buffer& block(Index layer, BlockSlot slot) const {
    return tensors[static_cast<std::size_t>(blockTensorIndex(layer, slot))];
  }
  const Buffer& lnfWeight() const { return tensors[static_cast<std::size_t>(lnfWeightIndex(config))]; }
  const Buffer& lnfBias() const { return tensors[static_cast<std::size_t>(lnfBiasIndex(config))]; }
};

using HostWeights = Weights<HostTensor>;

// Whether every tensor of w has the element count its spec says; an error naming the first that
// does not (`source` names where the weights came from).
osprey::Result<void> checkShapes(const HostWeights& w, const std::string& source);

// The host weights lifted onto handler h (one fromList per tensor).
template <class H>
osprey::Result<Weights<osprey::BufferOf<H>>> upload(H& h, const HostWeights& host) {
  Weights<osprey::BufferOf<H>> out{host.config, {}};
  out.tensors.reserve(host.tensors.size());
  for (const HostTensor& t : host.tensors)
    out.tensors.push_back(OSPREY_TRY(h.fromList(std::span<const Scalar>(t.values))));
  return out;
}

}  // namespace gpt2
