// The allowed values of every numeric training setting, in one place. The command line's
// validators (cli_options.hpp), the trainer_state.json reader (manifest_reader.hpp) and the loop's
// last check before it starts (loop.hpp) all test against these, so a value refused on the
// command line is refused in a manifest too, in the same words, and NaN never slips through a
// comparison (every test here is written so that NaN fails it).
#pragma once

#include <limits>
#include <optional>
#include <string>

#include "gpt2/layers/adamw.hpp"
#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace gpt2::train {

using osprey::Index;

// A range of reals; an infinite bound means "no bound" (the value must still be finite).
struct RealLimits {
  double low;
  bool lowIncluded;
  double high;
  bool highIncluded;
};

inline constexpr double kNoBound = std::numeric_limits<double>::infinity();
inline constexpr RealLimits kPositive{0.0, false, kNoBound, false};      // lr, eps
inline constexpr RealLimits kNonNegative{0.0, true, kNoBound, false};    // weight decay, --time-limit
inline constexpr RealLimits kBeta{0.0, true, 1.0, false};                // beta1, beta2: [0, 1)
inline constexpr RealLimits kAnyFinite{-kNoBound, false, kNoBound, false};  // a recorded loss

// An inclusive range of integers.
struct IntLimits {
  Index low;
  Index high;
};

inline constexpr Index kMaxIndex = std::numeric_limits<Index>::max();
inline constexpr IntLimits kCount{0, kMaxIndex};        // steps, positions, epochs
inline constexpr IntLimits kAtLeastOne{1, kMaxIndex};   // batch, seq
// The step counter: one below the largest Index, so that the next step's number exists.
inline constexpr IntLimits kStepCounter{0, kMaxIndex - 1};

// "a finite number > 0", "a number in [0, 1)", "a finite number >= 0", "a finite number".
std::string describe(const RealLimits& r);
// "an integer >= 1", "an integer in [0, 9223372036854775806]".
std::string describe(const IntLimits& r);

bool within(double x, const RealLimits& r);
inline bool within(Index x, const IntLimits& r) { return x >= r.low && x <= r.high; }

// A value as an error message shows it: at most 40 characters of what was written, so a
// 300-digit argument does not fill the screen.
std::string shown(const std::string& text);
std::string shown(double x);

// Every AdamW setting within its range; the error names `where` and the setting as the command
// line spells it (e.g. "trainer_state.json: --beta1 is 1: must be a number in [0, 1)").
osprey::Result<void> checkAdamW(const AdamWSettings& s, const std::string& where);

}  // namespace gpt2::train
