// The width-4 block's input and parameters: deterministic values from a tiny fixed generator.
//
// The oracles (tools/oracle/block_reference.py, tools/oracle/block.py) implement the same
// generator and the same draw order, so both sides start from identical doubles without
// shipping a weights file. The golden file also records every value it used, and the block test
// checks those against the ones made here bit for bit.
//
// Generator: splitmix64 (Steele, Lea, Flood 2014), state advanced by 0x9E3779B97F4A7C15; each
// 64-bit output z becomes uniform u = (z >> 11) * 2^-53 in [0, 1) and then 2u - 1 in [-1, 1)
// (both steps exact in float64). Tensors are drawn in the order of kTensorNames below, each in
// row-major order, and scaled as kTensorNames says.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "block/block.hpp"

namespace block {

inline constexpr std::uint64_t kSeed = 20240527;

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : m_state(seed) {}
  std::uint64_t next() {
    m_state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = m_state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  Scalar symmetric() { return 2.0 * (static_cast<Scalar>(next() >> 11) * 0x1.0p-53) - 1.0; }

 private:
  std::uint64_t m_state;
};

// How each tensor's values are made from u in [-1, 1): value = offset + scale * u.
struct TensorRecipe {
  const char* name;
  Index size;
  Scalar offset, scale;
};

// Draw order, names (as in the golden file and a Hugging Face GPT-2 layer), sizes, scaling.
inline constexpr std::array<TensorRecipe, 13> kTensorRecipes = {{
    {"x", T * C, 0.0, 1.0},
    {"ln_1.weight", C, 1.0, 0.25},
    {"ln_1.bias", C, 0.0, 0.1},
    {"attn.c_attn.weight", C * 3 * C, 0.0, 0.5},
    {"attn.c_attn.bias", 3 * C, 0.0, 0.1},
    {"attn.c_proj.weight", C * C, 0.0, 0.5},
    {"attn.c_proj.bias", C, 0.0, 0.1},
    {"ln_2.weight", C, 1.0, 0.25},
    {"ln_2.bias", C, 0.0, 0.1},
    {"mlp.c_fc.weight", C * 4 * C, 0.0, 0.5},
    {"mlp.c_fc.bias", 4 * C, 0.0, 0.1},
    {"mlp.c_proj.weight", 4 * C * C, 0.0, 0.5},
    {"mlp.c_proj.bias", C, 0.0, 0.1},
}};

// Host values of the input and every parameter, in kTensorRecipes order.
struct HostValues {
  std::vector<std::pair<std::string, std::vector<Scalar>>> tensors;

  const std::vector<Scalar>& operator[](const std::string& name) const {
    for (const auto& [n, v] : tensors)
      if (n == name) return v;
    throw std::out_of_range("block: no tensor named " + name);
  }
};

inline HostValues makeHostValues(std::uint64_t seed = kSeed) {
  SplitMix64 rng(seed);
  HostValues out;
  for (const TensorRecipe& r : kTensorRecipes) {
    std::vector<Scalar> values(static_cast<std::size_t>(r.size));
    for (Scalar& v : values) v = r.offset + r.scale * rng.symmetric();
    out.tensors.emplace_back(r.name, std::move(values));
  }
  return out;
}

// The input lifted onto handler H.
template <osprey::Tensor H>
Result<Buf<H>> liftInput(H& h, const HostValues& v) {
  return h.fromList(std::span<const Scalar>(v["x"]));
}

// The parameters lifted onto handler H.
template <osprey::Tensor H>
Result<Params<H>> liftParams(H& h, const HostValues& v) {
  auto lift = [&](const char* name) { return h.fromList(std::span<const Scalar>(v[name])); };
  Params<H> p;
  p.ln1Weight = OSPREY_TRY(lift("ln_1.weight"));
  p.ln1Bias = OSPREY_TRY(lift("ln_1.bias"));
  p.qkvWeight = OSPREY_TRY(lift("attn.c_attn.weight"));
  p.qkvBias = OSPREY_TRY(lift("attn.c_attn.bias"));
  p.projWeight = OSPREY_TRY(lift("attn.c_proj.weight"));
  p.projBias = OSPREY_TRY(lift("attn.c_proj.bias"));
  p.ln2Weight = OSPREY_TRY(lift("ln_2.weight"));
  p.ln2Bias = OSPREY_TRY(lift("ln_2.bias"));
  p.fcWeight = OSPREY_TRY(lift("mlp.c_fc.weight"));
  p.fcBias = OSPREY_TRY(lift("mlp.c_fc.bias"));
  p.mlpWeight = OSPREY_TRY(lift("mlp.c_proj.weight"));
  p.mlpBias = OSPREY_TRY(lift("mlp.c_proj.bias"));
  return p;
}

}  // namespace block
