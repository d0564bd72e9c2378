// Sampling the next token from a logits row: the same token on every exact handler, bit for bit.
//
// The exact handlers' logits are already the same doubles (DESIGN.md §4); the draw is made on the
// host from that row, in float64, with integer randomness and no platform libm, so it is the same
// on every machine too. For logits l (V), temperature τ > 0, top-k K, top-p p, seed s and the
// position t of the token being drawn (its index in the whole sequence, prompt included):
//
//   1. every l[v] must be a number below +inf (NaN or +inf: an error, as for greedy);
//      z[v] = l[v] / τ, one IEEE division;
//   2. the tokens in order of z, largest first, ties by smaller index (a total order: any correct
//      sort gives the same sequence o_0, o_1, ...);
//   3. top-k: the first K of them (K = 0 or K >= V: all V);
//   4. w_j = osprey::math::exp(z[o_j] - z[o_0]) (so w_0 = 1) and c_j = w_0 + ... + w_j, added
//      left to right in that order from +0.0;
//   5. top-p: the first n tokens, n the smallest with c_{n-1} >= p · c_{last} (p = 1: all of them);
//   6. u = the first two words of Philox4x32-10 (key {s mod 2^32, s / 2^32}, counter
//      {t mod 2^32, t / 2^32, 0, 0}) as (w0·2^32 + w1) >> 11, times 2^-53: a double in [0, 1)
//      made of 53 random bits; r = u · c_{n-1};
//   7. the token is o_j for the first j < n with c_j > r (if rounding left none, the first j with
//      c_j = c_{n-1}).
//
// The draw for position t depends on s and t alone, never on the tokens before it or on how
// many draws ran (a counter-based generator, gpt2/sampling/philox.hpp). Temperature 0 is greedy
// decoding (generate.hpp's greedyToken), unchanged and the default.
#pragma once

#include <cstdint>
#include <span>

#include "gpt2/model/init.hpp"  // kDefaultSeed
#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace gpt2::sampling {

struct SamplingSettings {
  double temperature = 0.0;              // 0: greedy (the default); else finite and > 0
  osprey::Index topK = 0;                // 0: no top-k cut
  double topP = 1.0;                     // 1: no nucleus cut; 0 < topP <= 1
  std::uint64_t seed = kDefaultSeed;     // Philox's key

  bool greedy() const { return temperature == 0.0; }
};

// The settings' ranges, worded as options: "--temperature -1: ...". top-k and top-p with
// greedy decoding are an error too (they would be ignored).
osprey::Result<void> checkSampling(const SamplingSettings& settings);

// Step 6's u for seed and position: 53 random bits as a double in [0, 1).
double uniformAt(std::uint64_t seed, std::uint64_t position);

// Steps 1-7: the token drawn from `logits` (V) for the token at `position`. Settings must have
// passed checkSampling and not be greedy.
osprey::Result<int> sampleToken(std::span<const osprey::Scalar> logits, const SamplingSettings& settings,
                                std::uint64_t position);

}  // namespace gpt2::sampling
