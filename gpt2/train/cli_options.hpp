// Command-line options `train-step` and `train` share: the data and batch shape, and AdamW.
// Every number is checked against limits.hpp's ranges, reals by `realWithin`, counts by
// `countWithin`: CLI11's own PositiveNumber and Range let "nan" through (a comparison with NaN
// is false) and describe an open bound with the largest double's 309 digits.
#pragma once

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "gpt2/layers/adamw.hpp"
#include "gpt2/train/limits.hpp"
#include "osprey/config.hpp"

namespace gpt2::train {

// A real option's check: a decimal number, read whole, within `limits`. CLI11 prefixes the
// message with the option's name ("--lr: `nan` is not a finite number > 0").
inline CLI::Validator realWithin(const RealLimits& limits) {
  return CLI::Validator(
      [limits](std::string& text) -> std::string {
        // Decimal only: strtod would also read hex floats ("0x1p-3").
        const bool hex = text.find_first_of("xX") != std::string::npos;
        char* end = nullptr;
        const double x = text.empty() || hex ? 0.0 : std::strtod(text.c_str(), &end);
        if (text.empty() || hex || end != text.c_str() + text.size())
          return fmt::format("`{}` is not a decimal number: must be {}", shown(text), describe(limits));
        if (!within(x, limits)) return fmt::format("`{}` is not {}", shown(text), describe(limits));
        return {};
      },
      describe(limits));
}

// The range of a count as a message says it: "more than 0", "0 or more", "in [1, 2147483647]".
inline std::string rangeWords(const IntLimits& limits) {
  if (limits.high == kMaxIndex)
    return limits.low == 0 ? std::string("0 or more") : fmt::format("more than {}", limits.low - 1);
  return fmt::format("in [{}, {}]", limits.low, limits.high);
}

// An integer option's check: decimal digits (an optional '-'), within `limits`
// ("--batch: 0 is out of range: more than 0").
inline CLI::Validator countWithin(const IntLimits& limits) {
  return CLI::Validator(
      [limits](std::string& text) -> std::string {
        const std::size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
        if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos)
          return fmt::format("`{}` is not a decimal integer", shown(text));
        errno = 0;
        const long long x = std::strtoll(text.c_str(), nullptr, 10);
        if (errno == ERANGE || x < limits.low || x > limits.high)
          return fmt::format("{} is out of range: {}", shown(text), rangeWords(limits));
        return {};
      },
      rangeWords(limits));
}

inline constexpr IntLimits kGpus{1, INT_MAX};

// --data FILE, --batch B, --seq T, --micro-batch M
inline void addDataOptions(CLI::App& sub, std::string& data, osprey::Index& batch, osprey::Index& seq,
                           osprey::Index& microBatch) {
  sub.add_option("--data", data, "a text file (tokenised once, the tokens cached in the cache directory) or an llm.c token shard (.bin)")
      ->required();
  sub.add_option("--batch", batch, "B: sequences per step")->capture_default_str()->check(countWithin(kAtLeastOne));
  sub.add_option("--seq", seq, "T: tokens per sequence")->capture_default_str()->check(countWithin(kAtLeastOne));
  sub.add_option("--micro-batch", microBatch,
                 "rows per micro-batch; the step's gradient is the sum of the micro-batch gradients in "
                 "order (0: the whole batch at once)")
      ->capture_default_str()
      ->check(countWithin(kCount));
}

// --lr, --beta1, --beta2, --eps, --weight-decay (PyTorch AdamW's defaults, lr 1e-3, no decay)
inline void addAdamWOptions(CLI::App& sub, AdamWSettings& s) {
  sub.add_option("--lr", s.lr, "AdamW learning rate")->capture_default_str()->check(realWithin(kPositive));
  sub.add_option("--beta1", s.beta1, "AdamW beta1")->capture_default_str()->check(realWithin(kBeta));
  sub.add_option("--beta2", s.beta2, "AdamW beta2 (llm.c and GPT-2 recipes use 0.95)")
      ->capture_default_str()
      ->check(realWithin(kBeta));
  sub.add_option("--eps", s.eps, "AdamW epsilon")->capture_default_str()->check(realWithin(kPositive));
  sub.add_option("--weight-decay", s.weightDecay, "AdamW decoupled weight decay (2-D tensors only)")
      ->capture_default_str()
      ->check(realWithin(kNonNegative));
}

}  // namespace gpt2::train
