// One GPT-2 training step (forward, backward, AdamW) per handler, timed after it is checked.
//
//   osprey_bench_train_step [--preset 124M|350M|774M|1558M|tiny] [--batch 4] [--seq 64] [--handlers lists,host]
//                           [--repeats 3] [--profile]
//
// Check before timing: the first step on every handler must give a finite loss, and the loss and
// every gradient tensor's sum must be the same bits on every handler; otherwise the program
// stops with status 1 before reporting a time. That first step is also the first measurement.
//
// Peer: llm.c's CPU reference train_gpt2.c (float32, -Ofast -march=native, OpenMP), timed beside
// this benchmark in one session, alternating, by bench/peers/llmc_cpu.sh (a ratio against a figure
// from another session or machine would compare machines, not programs).
// Work per step, for the rate printed beside each time: forward ≈ 2·N·P + attention, backward
// ≈ twice that, with N = B·T tokens and P the parameters in matrices (the lm head included);
// this program counts 6·N·P_matmul + the attention products (12·L·B·T²·C) as "flops".
//
// --profile: wall time per layer (train_clock.hpp) of one more step on the last handler.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpt2/model/init.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/host_copy.hpp"
#include "gpt2/train/step.hpp"
#include "osprey/gpu/host/handler.hpp"
#include "osprey/lists/lists.hpp"

namespace {

using namespace gpt2;
using namespace gpt2::train;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string preset = "124M";
  Index batch = 4, seq = 64;
  std::vector<std::string> handlers = {"lists", "host"};
  int repeats = 3;
  bool profile = false;
};

struct Outcome {
  Scalar loss = 0.0;
  std::vector<Scalar> gradSums;
  std::vector<double> seconds;  // per timed step (the first is the checked one)
};

// A deterministic batch: ids spread over the vocabulary (a fixed LCG, no tokenizer needed).
data::Batch benchBatch(Index B, Index T, Index V) {
  data::Batch b;
  b.B = B;
  b.T = T;
  std::uint64_t s = 12345;
  auto next = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<data::TokenId>((s >> 33) % static_cast<std::uint64_t>(V));
  };
  std::vector<data::TokenId> stream(static_cast<std::size_t>(B * T + 1));
  for (auto& t : stream) t = next();
  b.inputs.assign(stream.begin(), stream.end() - 1);
  b.targets.assign(stream.begin() + 1, stream.end());
  return b;
}

// One step (gradients + AdamW) on handler h; the loss and gradient sums of the first.
template <class H>
osprey::Result<Outcome> run(H& h, const HostWeights& host, const data::Batch& batch, int steps, LayerClock* clock) {
  Outcome o;
  auto w = OSPREY_TRY(upload(h, host));
  auto state = OSPREY_TRY(freshOptimizer(h, w));
  for (int k = 0; k < steps; ++k) {
    const auto start = Clock::now();
    auto g = OSPREY_TRY(batchGradients(h, w, batch, 0, clock));
    const auto updateStart = Clock::now();
    auto next = OSPREY_TRY(adamwStep(h, w, state, g.grads, defaultAdamW()));
    const auto end = Clock::now();
    if (clock) clock->lap("adamw");
    (void)updateStart;
    o.seconds.push_back(std::chrono::duration<double>(end - start).count());
    if (k == 0) {
      o.loss = g.loss;
      for (const auto& t : g.grads.tensors) o.gradSums.push_back(OSPREY_TRY(sum(h, t)));
    }
    // Every timed step starts from the same weights and state: the same work each time.
  }
  return o;
}

osprey::Result<Outcome> runNamed(const std::string& name, const HostWeights& host, const data::Batch& batch,
                                 int steps, LayerClock* clock) {
  if (name == "lists") {
    osprey::Lists h;
    return osprey::strictly([&] { return run(h, host, batch, steps, clock); });
  }
  if (name == "host") {
    osprey::GpuHost h(*osprey::HostDevice::open());
    return osprey::strictly([&] { return run(h, host, batch, steps, clock); });
  }
  return osprey::Error{fmt::format("unknown handler `{}`: choose lists or host", name)};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double flopsPerStep(const Config& c, Index B, Index T) {
  const double N = static_cast<double>(B * T), C = static_cast<double>(c.C);
  const double matrices = static_cast<double>(c.L) * 12.0 * C * C + static_cast<double>(c.V) * C;
  const double attention = 12.0 * static_cast<double>(c.L) * static_cast<double>(B) * static_cast<double>(T * T) * C;
  return 6.0 * N * matrices + attention;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--preset") o.preset = value();
    else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--seq") o.seq = std::stoll(value());
    else if (a == "--repeats") o.repeats = std::max(1, std::stoi(value()));
    else if (a == "--profile") o.profile = true;
    else if (a == "--handlers") {
      o.handlers.clear();
      std::string list = value(), item;
      for (char ch : list + ",") {
        if (ch == ',') {
          if (!item.empty()) o.handlers.push_back(item);
          item.clear();
        } else {
          item += ch;
        }
      }
    } else {
      std::cerr << "usage: osprey_bench_train_step [--preset 124M|350M|774M|1558M|tiny] [--batch B] [--seq T] "
                   "[--handlers lists,host] [--repeats N] [--profile]\n";
      return 2;
    }
  }
  const auto config = presetNamed(o.preset);
  if (!config) {
    std::cerr << "unknown preset " << o.preset << "\n";
    return 2;
  }
  const HostWeights weights = initialWeights(*config, kDefaultSeed);
  const data::Batch batch = benchBatch(o.batch, o.seq, config->V);
  const double flops = flopsPerStep(*config, o.batch, o.seq);
  fmt::print("GPT-2 ({}) training step, B={} T={}, {:.1f} GFLOP per step (llm.c beside it: bench/peers/llmc_cpu.sh)\n",
             o.preset, o.batch, o.seq, flops / 1e9);

  std::vector<Outcome> outcomes;
  for (const auto& name : o.handlers) {
    // lists is the slow reference: its checked step is its only measurement.
    const int steps = name == "lists" ? 1 : o.repeats;
    auto r = runNamed(name, weights, batch, steps, nullptr);
    if (!r.ok()) {
      std::cerr << name << ": " << r.error().message << "\n";
      return 1;
    }
    if (!std::isfinite(r->loss)) {
      std::cerr << name << ": the loss is not finite (" << r->loss << ")\n";
      return 1;
    }
    if (!outcomes.empty()) {
      const Outcome& first = outcomes.front();
      if (std::memcmp(&first.loss, &r->loss, sizeof(Scalar)) != 0 || first.gradSums.size() != r->gradSums.size() ||
          std::memcmp(first.gradSums.data(), r->gradSums.data(), sizeof(Scalar) * first.gradSums.size()) != 0) {
        std::cerr << fmt::format("{} disagrees with {}: loss {:.17g} vs {:.17g} (or a gradient sum differs)\n",
                                 name, o.handlers.front(), r->loss, first.loss);
        return 1;
      }
    }
    const double m = median(r->seconds);
    fmt::print("{:>6}: loss {:.17g}; step {:.3f} s median of {} ({}), {:.2f} GFLOP/s\n",
               name, r->loss, m, r->seconds.size(),
               fmt::format("{:.3f}", fmt::join(r->seconds, " ")), flops / m / 1e9);
    std::cout.flush();
    outcomes.push_back(std::move(*r));
  }
  if (outcomes.size() > 1) fmt::print("handlers agree: loss and all {} gradient sums bit for bit\n", outcomes.front().gradSums.size());

  if (o.profile) {
    LayerClock clock;
    auto r = runNamed(o.handlers.back(), weights, batch, 1, &clock);
    if (!r.ok()) return 1;
    double total = 0.0;
    for (const auto& [name, s] : clock.totals()) total += s;
    fmt::print("profile of one step on {} ({:.3f} s in layers):\n", o.handlers.back(), total);
    auto rows = clock.totals();
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [name, s] : rows) fmt::print("  {:<28} {:8.3f} s  {:5.1f}%\n", name, s, 100.0 * s / total);
  }
  return 0;
}
