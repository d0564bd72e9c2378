// The ranges of the training settings and their descriptions (see limits.hpp).
#include "gpt2/train/limits.hpp"

#include <cmath>

#include <fmt/format.h>

namespace gpt2::train {

std::string describe(const RealLimits& r) {
  const bool low = std::isfinite(r.low), high = std::isfinite(r.high);
  if (low && high)
    return fmt::format("a number in {}{:g}, {:g}{}", r.lowIncluded ? '[' : '(', r.low, r.high,
                       r.highIncluded ? ']' : ')');
  if (low) return fmt::format("a finite number {} {:g}", r.lowIncluded ? ">=" : ">", r.low);
  if (high) return fmt::format("a finite number {} {:g}", r.highIncluded ? "<=" : "<", r.high);
  return "a finite number";
}

std::string describe(const IntLimits& r) {
  if (r.high == kMaxIndex) return fmt::format("an integer >= {}", r.low);
  return fmt::format("an integer in [{}, {}]", r.low, r.high);
}

bool within(double x, const RealLimits& r) {
  // Written so that NaN fails every branch.
  if (!std::isfinite(x)) return false;
  const bool aboveLow = r.lowIncluded ? x >= r.low : x > r.low;
  const bool belowHigh = r.highIncluded ? x <= r.high : x < r.high;
  return aboveLow && belowHigh;
}

std::string shown(const std::string& text) {
  constexpr std::size_t kMax = 40;
  if (text.size() <= kMax) return text;
  return text.substr(0, kMax) + fmt::format("... ({} characters)", text.size());
}

// NaN's sign means nothing, so it is always "nan" (fmt would print "-nan" for some).
std::string shown(double x) { return std::isnan(x) ? std::string("nan") : fmt::format("{:g}", x); }

osprey::Result<void> checkAdamW(const AdamWSettings& s, const std::string& where) {
  struct Setting {
    const char* name;
    double value;
    RealLimits limits;
  };
  for (const Setting& k : {Setting{"--lr", s.lr, kPositive}, Setting{"--beta1", s.beta1, kBeta},
                           Setting{"--beta2", s.beta2, kBeta}, Setting{"--eps", s.eps, kPositive},
                           Setting{"--weight-decay", s.weightDecay, kNonNegative}})
    if (!within(k.value, k.limits))
      return osprey::Error{fmt::format("{}: {} is {}: must be {}", where, k.name, shown(k.value), describe(k.limits))};
  return {};
}

}  // namespace gpt2::train
