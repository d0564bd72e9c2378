// Wall time per layer of the training step, when asked for (bench/train --profile).
//
// The step's functions take an optional LayerClock*; each layer call is followed by one
// `lap("name")` that charges the time since the previous lap to that name. With no clock a lap is
// one branch. Times are wall-clock on the host: exact for lists and gpu/host, whose operations
// complete before they return.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace gpt2::train {

class LayerClock {
 public:
  using Clock = std::chrono::steady_clock;

  void restart() { m_last = Clock::now(); }
  void lap(const char* what) {
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - m_last).count();
    m_last = now;
    for (auto& [name, total] : m_totals)
      if (name == what) {
        total += seconds;
        return;
      }
    m_totals.emplace_back(what, seconds);
  }
  // (name, seconds) in the order the names first appeared.
  const std::vector<std::pair<std::string, double>>& totals() const { return m_totals; }
  void clear() { m_totals.clear(); }

 private:
  Clock::time_point m_last = Clock::now();
  std::vector<std::pair<std::string, double>> m_totals;
};

// The laps of one function: restarts the clock on entry.
class Laps {
 public:
  explicit Laps(LayerClock* clock) : m_clock(clock) {
    if (m_clock) m_clock->restart();
  }
  void operator()(const char* what) const {
    if (m_clock) m_clock->lap(what);
  }

 private:
  LayerClock* m_clock;
};

}  // namespace gpt2::train
