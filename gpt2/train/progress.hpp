// What the training loop shows while it runs, and the loss history it leaves behind.
//
// ProgressReporter: on a terminal, one line redrawn in place (a bar, the step, the loss, the last
// validation loss, tokens/s and the time left); otherwise (a pipe, a file, CI) one plain line per
// step, so logs stay readable.
//
// LossHistory: `<save dir>/loss.csv` with the header `step,train_loss,val_loss,tokens_per_s`, one
// row per step (val_loss empty on steps without validation), flushed as it goes. On resume, rows
// after the checkpoint's step are dropped first (they belong to a run that was not saved), so the
// file always describes the weights that exist.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace gpt2::train {

using osprey::Index;

class ProgressReporter {
 public:
  // Steps firstStep+1 .. lastStep will be reported.
  ProgressReporter(std::ostream& out, bool bar, Index firstStep, Index lastStep);

  // etaSeconds: the caller's estimate of the time left (steps left x time per step, or less
  // when a time limit ends the run sooner).
  void step(Index step, double loss, std::optional<double> valLoss, double tokensPerSecond,
            double secondsPerStep, double etaSeconds);
  // A line of its own (the bar, if drawn, is ended first).
  void note(const std::string& line);
  // Ends the bar's line.
  void finish();

 private:
  std::ostream& m_out;
  bool m_bar;
  Index m_first, m_last;
  bool m_open = false;  // a bar line is on screen without its newline
  std::optional<double> m_lastVal;
};

// "1h02m", "3m05s", "42s"
std::string formatDuration(double seconds);

class LossHistory {
 public:
  // Opens (creating) path; keeps only rows with step <= keepThrough (all rows are dropped when
  // keepThrough is 0: a fresh run).
  static osprey::Result<LossHistory> open(const std::filesystem::path& path, Index keepThrough);

  LossHistory(LossHistory&& other) noexcept;
  LossHistory& operator=(LossHistory&&) = delete;
  ~LossHistory();

  osprey::Result<void> append(Index step, double trainLoss, std::optional<double> valLoss,
                              double tokensPerSecond);

 private:
  LossHistory(std::filesystem::path path, std::FILE* file) : m_path(std::move(path)), m_file(file) {}
  std::filesystem::path m_path;
  std::FILE* m_file = nullptr;
};

}  // namespace gpt2::train
