// GPT-2's own initialisation, deterministic: the model Osprey runs when no checkpoint is found.
//
// The distributions are Hugging Face's GPT2PreTrainedModel._init_weights (which follows OpenAI):
//   wte, wpe, attn.c_attn.weight, mlp.c_fc.weight   N(0, 0.02²)
//   attn.c_proj.weight, mlp.c_proj.weight            N(0, (0.02 / sqrt(2·L))²)  (one residual
//                                                    write per sub-block, two per block)
//   every bias                                       0
//   LayerNorm weight / bias                          1 / 0
// The normal deviates come from init_random.hpp: the same bits on every platform for a seed.
#pragma once

#include <cstdint>

#include "gpt2/model/config.hpp"
#include "gpt2/model/weights.hpp"

namespace gpt2 {

// The seed used when none is given (`--seed N` changes it).
inline constexpr std::uint64_t kDefaultSeed = 1337;

// Fresh weights for config c. Tensor k's values are cut into chunks of kInitChunk elements and
// chunk j draws from its own stream (seed, k·2^32 + j): the result does not depend on how many
// threads fill it, and a tensor's values do not depend on any other tensor's.
inline constexpr Index kInitChunk = Index{1} << 16;
HostWeights initialWeights(const Config& c, std::uint64_t seed);

}  // namespace gpt2
