// Small models, batches and comparisons shared by the training tests.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt2/train/data_batches.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/train/host_copy.hpp"
#include "gpt2/train/step.hpp"
#include "gpt2/model/weights.hpp"

namespace osprey::testing::train {

// A GPT-2 small enough for finite differences: maxT 16, V 64, 2 blocks, 2 heads, width 16.
inline constexpr gpt2::Config kSmall{16, 64, 2, 2, 16};

// GPT-2's initialisation, then every bias and LayerNorm parameter moved off 0 / 1 (by a fixed,
// index-dependent amount), so a gradient that is wrong only for non-trivial biases or gains shows.
inline gpt2::HostWeights smallWeights(const gpt2::Config& c = kSmall, std::uint64_t seed = 7) {
  gpt2::HostWeights w = gpt2::initialWeights(c, seed);
  const auto specs = gpt2::parameterSpecs(c);
  for (std::size_t t = 0; t < specs.size(); ++t) {
    if (specs[t].shape.size() != 1) continue;
    auto& values = w.tensors[t].values;
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] += 0.05 * std::sin(static_cast<double>(3 * t + 7 * i + 1));
  }
  return w;
}

// A deterministic batch of B x T ids below V.
inline gpt2::data::Batch smallBatch(Index B, Index T, Index V, int salt = 0) {
  gpt2::data::Batch b;
  b.B = B;
  b.T = T;
  for (Index i = 0; i < B * T; ++i) {
    b.inputs.push_back(static_cast<gpt2::data::TokenId>((i * 17 + 5 + salt) % V));
    b.targets.push_back(static_cast<gpt2::data::TokenId>((i * 29 + 11 + 3 * salt) % V));
  }
  return b;
}

// Every tensor's values on the host.
template <class H>
std::vector<std::vector<Scalar>> allValues(H& h, const gpt2::Weights<typename H::Buffer>& w) {
  std::vector<std::vector<Scalar>> out;
  for (const auto& t : w.tensors) {
    auto v = gpt2::train::hostValues(h, t);
    if (!v.ok()) throw std::runtime_error(v.error().message);
    out.push_back(std::move(*v));
  }
  return out;
}

// Whether two lists of doubles are the same bits (NaN payloads included).
inline bool sameBits(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) return false;
  return true;
}

// The loss and every gradient of one training step on `batch` (whole, no micro-batches) on two
// handlers from weights w1 and w2 (the same host weights on each), bit for bit, each tensor named
// where it differs; the gradients are returned for the rest of a step. Tensors are compared one at
// a time, so no handler's gradients are copied whole to the host.
template <class H1, class H2>
std::pair<gpt2::train::StepGradients<H1>, gpt2::train::StepGradients<H2>> gradientsAgreeBitForBit(
    H1& h1, const gpt2::train::Params<H1>& w1, H2& h2, const gpt2::train::Params<H2>& w2,
    const gpt2::data::Batch& batch) {
  auto a = gpt2::train::batchGradients(h1, w1, batch, 0);
  if (!a.ok()) throw std::runtime_error(a.error().message);
  auto b = gpt2::train::batchGradients(h2, w2, batch, 0);
  if (!b.ok()) throw std::runtime_error(b.error().message);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a->loss), std::bit_cast<std::uint64_t>(b->loss))
      << a->loss << " against " << b->loss;
  const auto specs = gpt2::parameterSpecs(w1.config);
  EXPECT_EQ(a->grads.tensors.size(), specs.size());
  EXPECT_EQ(b->grads.tensors.size(), specs.size());
  for (std::size_t i = 0; i < specs.size() && i < a->grads.tensors.size() && i < b->grads.tensors.size(); ++i) {
    auto ga = gpt2::train::hostValues(h1, a->grads.tensors[i]);
    auto gb = gpt2::train::hostValues(h2, b->grads.tensors[i]);
    if (!ga.ok() || !gb.ok()) throw std::runtime_error("reading a gradient back failed");
    EXPECT_TRUE(sameBits(*ga, *gb)) << specs[i].name;
  }
  return {std::move(*a), std::move(*b)};
}

}  // namespace osprey::testing::train
