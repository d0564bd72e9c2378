// The differential dump: every output of the `tiny` GPT-2 that the exact contract covers
// (DESIGN.md §4), written as the raw bits of its doubles, for comparing builds, compilers and
// platforms byte for byte (scripts/differential.sh, docs/EXACTNESS.md).
//
// One line per value, `<quantity> <index or name> <value>`; a double is written as the 16 hex
// digits of its IEEE-754 bit pattern, then (for reading, and to compare with what osprey-gpt2
// prints) as fmt's 17 significant digits, which round-trip and come from fmt's own conversion,
// not the C library's. Tensors too large to list are written as the FNV-1a hash of their bits;
// `expand` names one of them to list element by element (how a mismatch is located).
//
//   logits.last      v   bits      the prompt's last-position logits (V)
//   generate.token   i   id        greedy tokens from generateGreedy (KV-cached decoding)
//   generate.logits  i   hash      the logits each token was chosen from (prefill, then decodeStep)
//   train.loss       -   bits      mean token loss of the batch
//   train.grad.sum   name bits     left-fold sum of each gradient tensor (what train-step prints)
//   train.grad       name hash     every gradient element
//   train.weights    name hash     every weight after one AdamW step
//   train.loss_after -   bits      the batch's loss with the updated weights
//
// Everything is computed by the model's own functions (model.hpp, generate.hpp,
// train_step.hpp, train_adamw.hpp); nothing here re-implements a layer. The file names no
// handler: driver.cpp instantiates it for each one it links.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpt2/model/config.hpp"
#include "gpt2/model/generate.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/model/model.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/host_copy.hpp"
#include "gpt2/train/step.hpp"
#include "gpt2/model/weights.hpp"

namespace differential {

using osprey::Index;
using osprey::Scalar;

// What is run: fixed, so every build computes the same thing.
struct Inputs {
  gpt2::Config config = gpt2::kGpt2Tiny;
  std::uint64_t seed = gpt2::kDefaultSeed;
  // GPT-2's ids of "The capital of France is" (the CLI runs of scripts/differential.sh use
  // that text, so their printed numbers come from the same tokens).
  std::vector<int> prompt = {464, 3139, 286, 4881, 318};
  Index tokens = 20;
  Index batch = 2, seq = 16;  // the training step's B x T
};

// The bits of a double, as an integer (the dump's only representation of a value).
inline std::uint64_t bitsOf(Scalar x) {
  std::uint64_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline std::string hex(std::uint64_t u) { return fmt::format("{:016x}", u); }

// FNV-1a (64-bit) over each value's bit pattern, least significant byte first: the same hash
// whatever the platform's byte order.
inline std::uint64_t hashBits(std::span<const Scalar> values) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (Scalar x : values) {
    const std::uint64_t u = bitsOf(x);
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (u >> (8 * byte)) & 0xffU;
      h *= 0x100000001b3ULL;
    }
  }
  return h;
}

// Where the dump goes: one line per value; `expand` (a "<quantity> <name>" key such as
// "train.grad wte") also lists that tensor's elements as "<quantity>[<name>] <i> <bits>".
struct Sink {
  std::string text;
  std::string expand;

  void value(const std::string& quantity, const std::string& key, Scalar x) {
    text += fmt::format("{} {} {} {:.17g}\n", quantity, key, hex(bitsOf(x)), x);
  }
  void integer(const std::string& quantity, const std::string& key, long long n) {
    text += fmt::format("{} {} {}\n", quantity, key, n);
  }
  void tensor(const std::string& quantity, const std::string& key, std::span<const Scalar> values) {
    text += fmt::format("{} {} {}\n", quantity, key, hex(hashBits(values)));
    if (expand != quantity + " " + key) return;
    for (std::size_t i = 0; i < values.size(); ++i)
      text += fmt::format("{}[{}] {} {}\n", quantity, key, i, hex(bitsOf(values[i])));
  }
};

// A fixed batch of token ids spread over the vocabulary (no tokenizer, no data file: the
// 32-bit builds link only the model).
inline gpt2::data::Batch trainingBatch(const Inputs& in) {
  gpt2::data::Batch b;
  b.B = in.batch;
  b.T = in.seq;
  const Index n = in.batch * in.seq;
  for (Index i = 0; i <= n; ++i) {
    const auto id = static_cast<gpt2::data::TokenId>((i * 7919 + 11) % in.config.V);
    if (i < n) b.inputs.push_back(id);
    if (i > 0) b.targets.push_back(id);
  }
  return b;
}

template <osprey::Tensor H>
osprey::Result<void> dumpLogitsAndGeneration(H& h, const Inputs& in, const gpt2::HostWeights& host, Sink& sink) {
  auto w = OSPREY_TRY(gpt2::prepareForward(h, OSPREY_TRY(gpt2::upload(h, host))));
  const std::span<const int> prompt(in.prompt);

  // The prompt's last-position logits, every value.
  auto tokens = OSPREY_TRY(gpt2::tokenBuffer(h, prompt));
  auto step = OSPREY_TRY(gpt2::prefill(h, w, tokens, static_cast<Index>(prompt.size())));
  const auto logits = OSPREY_TRY(gpt2::train::hostValues(h, step.logits));
  for (std::size_t v = 0; v < logits.size(); ++v) sink.value("logits.last", std::to_string(v), logits[v]);

  // Greedy generation as osprey-gpt2 generate runs it.
  std::vector<int> generated;
  OSPREY_TRY(gpt2::generateGreedy(h, w, prompt, in.tokens, [&](int id) -> osprey::Result<void> {
    generated.push_back(id);
    return {};
  }));
  for (std::size_t i = 0; i < generated.size(); ++i) sink.integer("generate.token", std::to_string(i), generated[i]);

  // The logits each of those tokens was chosen from: the prefill's, then one decodeStep per
  // generated token (fed the tokens above, so a wrong token shows up here as well).
  for (std::size_t i = 0; i < generated.size(); ++i) {
    if (i > 0) {
      const int one[1] = {generated[i - 1]};
      auto token = OSPREY_TRY(gpt2::tokenBuffer(h, std::span<const int>(one)));
      step = OSPREY_TRY(gpt2::decodeStep(h, w, step.cache, token));
    }
    const auto values = OSPREY_TRY(gpt2::train::hostValues(h, step.logits));
    sink.tensor("generate.logits", std::to_string(i), values);
  }
  return {};
}

template <osprey::Tensor H>
osprey::Result<void> dumpTrainingStep(H& h, const Inputs& in, const gpt2::HostWeights& host, Sink& sink) {
  const auto batch = trainingBatch(in);
  auto w = OSPREY_TRY(gpt2::upload(h, host));
  auto g = OSPREY_TRY(gpt2::train::batchGradients(h, w, batch, 0));
  sink.value("train.loss", "-", g.loss);
  const auto specs = gpt2::parameterSpecs(w.config);
  for (std::size_t i = 0; i < specs.size(); ++i)
    sink.value("train.grad.sum", specs[i].name, OSPREY_TRY(gpt2::sum(h, g.grads.tensors[i])));
  for (std::size_t i = 0; i < specs.size(); ++i)
    sink.tensor("train.grad", specs[i].name, OSPREY_TRY(gpt2::train::hostValues(h, g.grads.tensors[i])));

  auto state = OSPREY_TRY(gpt2::train::freshOptimizer(h, w));
  auto next = OSPREY_TRY(gpt2::train::adamwStep(h, w, state, g.grads, gpt2::train::defaultAdamW()));
  for (std::size_t i = 0; i < specs.size(); ++i)
    sink.tensor("train.weights", specs[i].name, OSPREY_TRY(gpt2::train::hostValues(h, next.weights.tensors[i])));
  sink.value("train.loss_after", "-", OSPREY_TRY(gpt2::train::batchLoss(h, next.weights, batch)));
  return {};
}

// The whole dump on handler h.
template <osprey::Tensor H>
osprey::Result<void> dumpAll(H& h, const Inputs& in, Sink& sink) {
  const gpt2::HostWeights host = gpt2::initialWeights(in.config, in.seed);
  OSPREY_CHECK(dumpLogitsAndGeneration(h, in, host, sink));
  return dumpTrainingStep(h, in, host, sink);
}

}  // namespace differential
