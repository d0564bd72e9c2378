// The body of every run, written once over the handler: upload the weights, print the header
// line naming the handler, then generate (greedy or sampled, streaming) or print logits.
// Instantiated once per handler by run_lists.cpp, run_host.cpp and run_cuda.cu; nothing here names a handler.
//
// Output contract (DESIGN.md §3): stdout's first line is `gpt2 (<label>) on <device>`; every
// later byte is the same on every handler. Timings go to stderr, and only when asked for.
#pragma once

#include <chrono>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "gpt2/model/generate.hpp"
#include "gpt2/model/model.hpp"
#include "gpt2/cli/run.hpp"
#include "gpt2/cli/run_memory.hpp"
#include "gpt2/sampling/sampled_generation.hpp"
#include "gpt2/train/loop.hpp"      // runJob for TrainJob
#include "gpt2/train/step_job.hpp"  // runJob for TrainStepJob
#include "gpt2/model/weights.hpp"
#include "osprey/effect.hpp"

namespace gpt2 {

namespace detail {

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A write to `out` that failed (closed pipe, full disk) is an error, not silently lost output.
inline osprey::Result<void> flushed(std::ostream& out) {
  out.flush();
  if (!out) return osprey::Error{"writing the output failed"};
  return {};
}

// The weights onto handler h in the forward pass's layout. Each host tensor is released as soon
// as the handler holds it, so a 124M run never holds two full copies (1 GB each).
template <osprey::Tensor H>
osprey::Result<ForwardWeights<H>> uploadAndRelease(H& h, HostWeights& host) {
  Weights<Buf<H>> w{host.config, {}};
  w.tensors.reserve(host.tensors.size());
  for (HostTensor& t : host.tensors) {
    w.tensors.push_back(OSPREY_TRY(h.fromList(std::span<const osprey::Scalar>(t.values))));
    std::vector<osprey::Scalar>().swap(t.values);
  }
  return prepareForward(h, std::move(w));
}

}  // namespace detail

template <osprey::Tensor H>
osprey::Result<void> runJob(H& h, GenerateJob& job, const Streams& s) {
  const auto start = std::chrono::steady_clock::now();
  s.out << "gpt2 (" << job.label << ") on " << h.device() << "\n";
  OSPREY_CHECK(detail::flushed(s.out));
  const auto w = OSPREY_TRY(detail::uploadAndRelease(h, job.weights));
  const double uploaded = detail::secondsSince(start);

  s.out << job.promptText;
  OSPREY_CHECK(detail::flushed(s.out));
  const auto generationStart = std::chrono::steady_clock::now();
  double firstToken = 0.0;
  Index produced = 0;
  auto onToken = [&](int id) -> osprey::Result<void> {
    if (produced++ == 0) firstToken = detail::secondsSince(generationStart);
    s.out << OSPREY_TRY(job.tokenizer.tokenText(id));
    return detail::flushed(s.out);
  };
  OSPREY_TRY(generateTokens(h, w, std::span<const int>(job.prompt), job.tokens, job.sampling, onToken));
  s.out << "\n";
  OSPREY_CHECK(detail::flushed(s.out));

  if (job.timing) {
    const double total = detail::secondsSince(generationStart);
    const double rest = total - firstToken;
    s.err << fmt::format("timing: weights onto {} {:.3f} s; prompt of {} tokens + first token {:.3f} s\n",
                         h.device(), uploaded, job.prompt.size(), firstToken);
    if (produced > 1)
      s.err << fmt::format("timing: {} more tokens {:.3f} s ({:.2f} tokens/s); generation {:.3f} s "
                           "({:.2f} tokens/s overall){}\n",
                           produced - 1, rest, static_cast<double>(produced - 1) / rest, total,
                           static_cast<double>(produced) / total, peakMemoryNote(h));
    s.err.flush();
  }
  return {};
}

template <osprey::Tensor H>
osprey::Result<void> runJob(H& h, LogitsJob& job, const Streams& s) {
  s.out << "gpt2 (" << job.label << ") on " << h.device() << "\n";
  OSPREY_CHECK(detail::flushed(s.out));
  const auto w = OSPREY_TRY(detail::uploadAndRelease(h, job.weights));
  OSPREY_CHECK(checkFitsContext(w.config, static_cast<Index>(job.prompt.size()), 0));
  auto tokens = OSPREY_TRY(tokenBuffer(h, std::span<const int>(job.prompt)));
  const auto step = OSPREY_TRY(prefill(h, w, tokens, static_cast<Index>(job.prompt.size())));
  std::string text;
  const Index V = h.length(step.logits);
  for (Index v = 0; v < V; ++v) text += fmt::format("{:.17g}\n", h.get(step.logits, v));
  s.out << text;
  return detail::flushed(s.out);
}

// One job on handler h.
template <osprey::Tensor H>
osprey::Result<void> runJob(H& h, ModelJob& job, const Streams& s) {
  return std::visit([&](auto& j) -> osprey::Result<void> { return runJob(h, j, s); }, job);
}

}  // namespace gpt2
