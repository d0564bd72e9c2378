// `osprey-gpt2 train` on one handler, written once: the training loop.
//
//   upload the weights (and, when resuming, the AdamW moments and step);
//   for each step: the next training batch (sequential, wrapping), gradients, AdamW;
//     every K steps the validation loss (the first `valBatches` batches of the validation split);
//     a progress line, a row of loss.csv, and every `saveEvery` steps a checkpoint;
//   a final checkpoint when a save directory is given, also after Ctrl-C, SIGTERM or SIGHUP
//   (interrupt.hpp) or when the --time-limit is reached:
//   the step in flight is finished first, so the checkpoint is a state training really reached.
//
// Nothing that is not finite is trusted: a step whose loss (or validation loss) is NaN or
// infinite, or whose update leaves a NaN or an infinity in the weights (finite.hpp, checked on
// the handler every step), stops the run with an error naming the step and the last step saved,
// before anything is saved; the save itself refuses non-finite weights or moments
// (checkpoint.hpp). So a good checkpoint is never replaced by a broken one, not by a
// --save-every save, nor the final one, nor the one after a signal.
//
// The step count, the data position and the moments are all the state there is, so a run resumed
// from a checkpoint computes exactly what the uninterrupted run would have (tests/train/
// resume_test.cpp checks the weights bit for bit).
//
// Data-parallel runs (job.parallel, train_ranks.hpp): every rank runs this loop on the same
// batches with the same weights; the step's gradient comes from train_parallel_step.hpp, so the
// ranks' weights stay identical. Rank 0 alone validates, writes loss.csv and saves (its
// checkpoint is every rank's state); the ranks agree each step on whether to stop (Ctrl-C on any
// of them, or the time limit), so all stop after the same step.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "gpt2/cli/run_memory.hpp"
#include "gpt2/train/data_batches.hpp"
#include "gpt2/cli/run.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/finite.hpp"
#include "gpt2/train/host_copy.hpp"
#include "gpt2/train/interrupt.hpp"
#include "gpt2/train/job.hpp"
#include "gpt2/train/limits.hpp"
#include "gpt2/train/parallel_step.hpp"
#include "gpt2/train/ranks.hpp"
#include "gpt2/train/progress.hpp"
#include "gpt2/train/run_dir.hpp"
#include "gpt2/train/step.hpp"

namespace gpt2 {
namespace train {

// Mean of the batch losses of the first `batches` batches of the validation split.
template <osprey::Tensor H>
osprey::Result<Scalar> validationLoss(H& h, const Params<H>& w, std::span<const data::TokenId> val,
                                      Index B, Index T, Index batches) {
  auto stream = OSPREY_TRY(data::BatchStream::create(val, B, T, "validation", "validation"));
  Scalar total = 0.0;
  for (Index k = 0; k < batches; ++k) total = total + OSPREY_TRY(batchLoss(h, w, stream.next()));
  return total / static_cast<Scalar>(batches);
}

// How many whole validation batches the split holds, capped at `wanted`.
inline Index validationBatchesAvailable(std::size_t valTokens, Index B, Index T, Index wanted) {
  const auto tokens = static_cast<Index>(valTokens);
  if (tokens < B * T + 1) return 0;
  return std::min(wanted, (tokens - 1) / (B * T));
}

// Weights, moments and manifest of the loop's current state, saved atomically.
template <osprey::Tensor H>
osprey::Result<void> saveState(H& h, const Params<H>& w, const OptimizerState<H>& opt,
                               const TrainerState& state, const TrainSettings& settings) {
  HostCheckpoint c;
  c.weights = OSPREY_TRY(hostCopy(h, w));
  c.m = OSPREY_TRY(hostCopy(h, opt.m));
  c.v = OSPREY_TRY(hostCopy(h, opt.v));
  c.state = state;
  return saveTrainingCheckpoint(*settings.saveDir, c, settings.tokenizerDir);
}

// The settings a run starts with, within their ranges (the command line and the manifest reader
// check them too; this catches a job built any other way, before anything runs).
inline osprey::Result<void> checkSettings(const TrainSettings& st, Index firstStep) {
  OSPREY_CHECK(checkAdamW(st.adamw, "training settings"));
  if (!within(st.timeLimitSeconds, kNonNegative))
    return osprey::Error{fmt::format("--time-limit is {}: must be {}", shown(st.timeLimitSeconds),
                                     describe(kNonNegative))};
  if (st.steps < 0 || st.steps > kMaxIndex - firstStep)
    return osprey::Error{fmt::format("--steps {} after step {}: must be {} (the step counter would overflow)",
                                     st.steps, firstStep, describe(IntLimits{0, kMaxIndex - firstStep}))};
  return {};
}

}  // namespace train

template <osprey::Tensor H>
osprey::Result<void> runJob(H& h, TrainJob& job, const Streams& s) {
  using Clock = std::chrono::steady_clock;
  using train::Scalar;
  const TrainSettings& st = job.settings;
  const train::DataParallel& dp = job.parallel;
  OSPREY_CHECK(train::checkSettings(st, job.resume ? job.resume->state.step : 0));
  s.out << "gpt2 (" << job.label << ") on " << h.device();
  if (dp.parallel())
    s.out << fmt::format(", {} ranks ({} gradient sum)", dp.size,
                         dp.sum == train::GradientSum::Exact ? "exact" : "all-reduce");
  s.out << "\n";
  s.out.flush();
  std::unique_ptr<train::RankGroup<H>> ranks;
  if (dp.parallel()) ranks = OSPREY_TRY(train::RankGroupFor<H>::open(h, dp));

  auto w = OSPREY_TRY(upload(h, job.weights));
  job.weights = HostWeights{job.weights.config, {}};
  train::OptimizerState<H> opt;
  train::TrainerState state = job.state;
  auto stream = OSPREY_TRY(data::BatchStream::create(job.trainTokens, st.batch, st.seq, "training",
                                                     state.dataPath));
  // The last step whose checkpoint is in the save directory, for the errors that stop a run.
  std::optional<Index> savedStep;
  if (job.resume) {
    if (!job.resume->note.empty()) s.err << job.resume->note << "\n";
    if (st.saveDir && train::resumesFrom(*st.saveDir, job.resume->source)) savedStep = job.resume->state.step;
    opt.step = job.resume->state.step;
    opt.m = OSPREY_TRY(upload(h, job.resume->m));
    opt.v = OSPREY_TRY(upload(h, job.resume->v));
    OSPREY_CHECK(stream.seek(job.resume->state.dataPosition, job.resume->state.dataEpoch));
    job.resume.reset();
  } else {
    opt = OSPREY_TRY(train::freshOptimizer(h, w));
  }
  const Index firstStep = opt.step, lastStep = opt.step + st.steps;
  state.step = opt.step;
  state.dataPosition = stream.position();
  state.dataEpoch = stream.epoch();

  const Index valBatches = st.valEvery > 0 && dp.leader()
      ? train::validationBatchesAvailable(job.valTokens.size(), st.batch, st.seq, st.valBatches) : 0;
  train::ProgressReporter progress(s.out, st.progressBar, firstStep, lastStep);
  if (st.valEvery > 0 && valBatches == 0 && dp.leader())
    progress.note(fmt::format("validation skipped: the validation split ({} tokens) is shorter than one "
                              "batch of {} x {} + 1", job.valTokens.size(), st.batch, st.seq));

  const bool saving = st.saveDir.has_value() && dp.leader();
  std::optional<train::LossHistory> history;
  if (saving) {
    std::error_code ec;
    std::filesystem::create_directories(*st.saveDir, ec);
    history.emplace(OSPREY_TRY(train::LossHistory::open(*st.saveDir / "loss.csv", firstStep)));
  }

  // An error that stops the run at a step that is not finite: it says what was kept, on a line of
  // its own (the progress bar's line is ended first).
  auto stopAt = [&](Index step, const std::string& what) {
    progress.finish();
    const std::string kept = !st.saveDir ? std::string("no --save directory: nothing saved")
                             : savedStep ? fmt::format("nothing saved after step {}", *savedStep)
                                         : fmt::format("nothing saved to {}", st.saveDir->string());
    return osprey::Error{fmt::format("step {}: {}; {}", step, what, kept)};
  };

  train::InterruptGuard guard;
  const auto runStart = Clock::now();
  bool interrupted = false, outOfTime = false;
  while (opt.step < lastStep) {
    interrupted = train::interruptRequested();
    outOfTime = st.timeLimitSeconds > 0 &&
                std::chrono::duration<double>(Clock::now() - runStart).count() >= st.timeLimitSeconds;
    if (ranks) {
      interrupted = OSPREY_TRY(ranks->anyRank(interrupted, "agreeing whether a stop signal arrived"));
      outOfTime = OSPREY_TRY(ranks->anyRank(outOfTime, "agreeing whether time is up"));
    }
    if (interrupted || outOfTime) break;
    const auto stepStart = Clock::now();
    const data::Batch batch = stream.next();
    train::StepGradients<H> g;
    if (ranks)
      g = OSPREY_TRY(train::parallelBatchGradients(h, w, batch, st.microBatch, *ranks, dp.sum));
    else
      g = OSPREY_TRY(train::batchGradients(h, w, batch, st.microBatch));
    const Index stepNumber = opt.step + 1;
    if (!std::isfinite(g.loss))
      return stopAt(stepNumber, fmt::format("the loss is {} (try a smaller --lr)", train::shown(g.loss)));
    auto next = OSPREY_TRY(train::adamwStep(h, w, opt, g.grads, st.adamw));
    if (const auto bad = OSPREY_TRY(train::firstNonFiniteTensor(h, next.weights)))
      return stopAt(stepNumber, fmt::format("the update left NaN or infinity in {} (the gradient or the step of "
                                            "--lr {:g} overflowed; try a smaller --lr)",
                                            parameterSpecs(w.config)[*bad].name, st.adamw.lr));
    w = std::move(next.weights);
    opt = std::move(next.state);
    train::waitForDevice(h, w.tensors.back());
    const double stepSeconds = std::chrono::duration<double>(Clock::now() - stepStart).count();

    std::optional<Scalar> val;
    if (valBatches > 0 && (opt.step % st.valEvery == 0 || opt.step == lastStep))
      val = OSPREY_TRY(train::validationLoss(h, w, std::span<const data::TokenId>(job.valTokens),
                                             st.batch, st.seq, valBatches));
    if (val && !std::isfinite(*val))
      return stopAt(opt.step, fmt::format("the validation loss is {}", train::shown(*val)));
    const double elapsed = std::chrono::duration<double>(Clock::now() - runStart).count();
    const double perStep = elapsed / static_cast<double>(opt.step - firstStep);
    const double tokensPerSecond = static_cast<double>(st.batch * st.seq) / stepSeconds;
    double eta = perStep * static_cast<double>(lastStep - opt.step);
    if (st.timeLimitSeconds > 0) eta = std::min(eta, std::max(0.0, st.timeLimitSeconds - elapsed));
    progress.step(opt.step, g.loss, val, tokensPerSecond, perStep, eta);

    state.step = opt.step;
    state.dataPosition = stream.position();
    state.dataEpoch = stream.epoch();
    state.lastTrainLoss = g.loss;
    if (history) OSPREY_CHECK(history->append(opt.step, g.loss, val, tokensPerSecond));
    if (saving && st.saveEvery > 0 && opt.step % st.saveEvery == 0 && opt.step != lastStep) {
      OSPREY_CHECK(train::saveState(h, w, opt, state, st));
      savedStep = opt.step;
    }
  }
  progress.finish();
  if (saving) {
    OSPREY_CHECK(train::saveState(h, w, opt, state, st));
    progress.note(fmt::format("saved step {} to {}", opt.step, train::checkpointDir(*st.saveDir).string()));
  }
  if (outOfTime)
    progress.note(fmt::format("time limit of {} reached after step {}", train::formatDuration(st.timeLimitSeconds),
                              opt.step));
  if (interrupted)
    progress.note(fmt::format("interrupted: stopped cleanly after step {} ({}; {})", opt.step, train::interruptSource(),
                              st.saveDir ? "checkpoint saved" : "no --save directory: nothing saved"));
  const double total = std::chrono::duration<double>(Clock::now() - runStart).count();
  progress.note(fmt::format("trained {} steps in {}{}", opt.step - firstStep, train::formatDuration(total),
                            peakMemoryNote(h)));
  if (!s.out) return osprey::Error{"writing the output failed"};
  return {};
}

}  // namespace gpt2
