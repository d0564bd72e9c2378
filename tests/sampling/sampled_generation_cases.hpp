// Sampled generation on the tiny model, as function templates over the handler (an nvcc extended
// lambda may not live in a gtest body): the tokens a handler samples, for the cross-handler
// comparisons of sampled_generation_test.cpp (lists against gpu/host) and of the cuda binary.
#pragma once

#include <span>
#include <stdexcept>
#include <vector>

#include "gpt2/model_cases.hpp"
#include "gpt2/sampling/sampled_generation.hpp"

namespace gpt2::testing {

inline sampling::SamplingSettings sampledAt(double temperature, std::uint64_t seed, osprey::Index topK = 0,
                                            double topP = 1.0) {
  sampling::SamplingSettings s;
  s.temperature = temperature;
  s.seed = seed;
  s.topK = topK;
  s.topP = topP;
  return s;
}

// `count` tokens after `prompt` on the tiny model, drawn with `settings` on handler h.
template <class H>
std::vector<int> tinyTokens(H& h, const ForwardWeights<H>& w, std::span<const int> prompt, osprey::Index count,
                            const sampling::SamplingSettings& settings) {
  std::vector<int> streamed;
  auto tokens = generateTokens(h, w, prompt, count, settings, [&](int id) -> osprey::Result<void> {
    streamed.push_back(id);
    return {};
  });
  if (!tokens.ok()) throw std::runtime_error(tokens.error().message);
  if (streamed != *tokens) throw std::runtime_error("the streamed tokens are not the tokens returned");
  return std::move(*tokens);
}

// The settings the cross-handler comparisons sample with: plain, top-k, top-p, both.
inline std::vector<sampling::SamplingSettings> crossHandlerSettings() {
  return {sampledAt(1.0, 1337), sampledAt(0.8, 7, 40), sampledAt(1.3, 99, 0, 0.9), sampledAt(1.0, 2026, 50, 0.95)};
}

}  // namespace gpt2::testing
