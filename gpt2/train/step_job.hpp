// `osprey-gpt2 train-step` on one handler, written once: upload the weights, one training step on
// the job's batch, then print
//
//   gpt2 (<label>) on <device>              the only line that names the handler
//   <where the batch came from>
//   loss <mean token loss>
//   grad <name> <sum of the tensor>          one line per parameter tensor, in the fixed order
//   loss after step <loss of the same batch with the updated weights>
//
// Numbers have 17 significant digits (they round-trip), and the sums are left folds in element
// order, so every line after the first is the same bytes on every handler.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "gpt2/cli/run.hpp"
#include "gpt2/cli/run_memory.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/job.hpp"
#include "gpt2/train/step.hpp"

namespace gpt2 {

template <osprey::Tensor H>
osprey::Result<void> runJob(H& h, TrainStepJob& job, const Streams& s) {
  using Clock = std::chrono::steady_clock;
  s.out << "gpt2 (" << job.label << ") on " << h.device() << "\n" << job.description << "\n";
  s.out.flush();
  auto w = OSPREY_TRY(upload(h, job.weights));
  job.weights = HostWeights{job.weights.config, {}};  // the handler holds them now

  const auto start = Clock::now();
  auto g = OSPREY_TRY(train::batchGradients(h, w, job.batch, job.microBatch));
  train::waitForDevice(h, g.grads.tensors.back());
  const auto backwardDone = Clock::now();
  std::string text = fmt::format("loss {:.17g}\n", g.loss);
  const auto specs = parameterSpecs(w.config);
  for (std::size_t i = 0; i < specs.size(); ++i)
    text += fmt::format("grad {} {:.17g}\n", specs[i].name, OSPREY_TRY(sum(h, g.grads.tensors[i])));
  s.out << text;
  s.out.flush();

  auto state = OSPREY_TRY(train::freshOptimizer(h, w));
  const auto updateStart = Clock::now();
  auto next = OSPREY_TRY(train::adamwStep(h, w, state, g.grads, job.adamw));
  train::waitForDevice(h, next.weights.tensors.back());
  const auto updateDone = Clock::now();
  const osprey::Scalar after = OSPREY_TRY(train::batchLoss(h, next.weights, job.batch));
  s.out << fmt::format("loss after step {:.17g}\n", after);
  s.out.flush();
  if (!s.out) return osprey::Error{"writing the output failed"};

  if (!job.timing) return {};
  const auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  s.err << fmt::format("timing: forward + backward {:.3f} s, AdamW {:.3f} s, step {:.3f} s on {}{}\n",
                       seconds(start, backwardDone), seconds(updateStart, updateDone),
                       seconds(start, backwardDone) + seconds(updateStart, updateDone), h.device(), peakMemoryNote(h));
  s.err.flush();
  return {};
}

}  // namespace gpt2
