// The loss curve of a training run: `<save dir>/loss.png`, drawn from `<save dir>/loss.csv`
// (progress.hpp's LossHistory) by gnuplot, the training loss of every step as a line and the
// validation loss where it was measured as points joined by a line.
//
// The gnuplot program is a file of its own, `<save dir>/loss.gp`, written before the run starts:
// `gnuplot DIR/loss.gp` redraws loss.png from the rows written so far, while the run goes on or
// after it ended (and after installing gnuplot, when it was missing). It names no path: it finds
// loss.csv beside itself (gnuplot's ARG0), so a run directory copied elsewhere (off a GPU machine
// without gnuplot, say) draws there too.
//
// Drawing is never a reason for a run to fail: a missing gnuplot (Debian: gnuplot-nox) or one
// that fails gives a note saying what happened and how to draw the curve by hand.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "osprey/result.hpp"

namespace gpt2::train {

// `<dir>/loss.gp`, `<dir>/loss.csv`, `<dir>/loss.png`
std::filesystem::path lossCurveProgramPath(const std::filesystem::path& saveDir);
std::filesystem::path lossCurvePath(const std::filesystem::path& saveDir);

// The gnuplot program that draws loss.png from loss.csv in its own directory, under `title`.
std::string lossCurveProgram(std::string_view title);

// Writes it to lossCurveProgramPath(saveDir) (atomically).
osprey::Result<void> writeLossCurveProgram(const std::filesystem::path& saveDir, std::string_view title);

// Runs `gnuplot` (the program of that name on the PATH, or the path given) on
// lossCurveProgramPath(saveDir). The result is one line for the run's output:
//   "loss curve: DIR/loss.png (gnuplot DIR/loss.gp redraws it)"
//   "loss curve not drawn: gnuplot is not installed (Debian: apt-get install gnuplot-nox); ..."
//   "loss curve not drawn: gnuplot failed (exit status N): <its last message>"
// and no note at all (drawn false, note empty) when DIR/loss.csv records no step: a run that
// failed before its first step has no curve to speak of.
struct LossCurveOutcome {
  bool drawn = false;
  std::string note;
};
LossCurveOutcome drawLossCurve(const std::filesystem::path& saveDir, const std::string& gnuplot = "gnuplot");

}  // namespace gpt2::train
