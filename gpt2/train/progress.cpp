// Progress display and the loss history (see train_progress.hpp).
#include "gpt2/train/progress.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "osprey/io/atomic_file.hpp"

namespace gpt2::train {

std::string formatDuration(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

ProgressReporter::ProgressReporter(std::ostream& out, bool bar, Index firstStep, Index lastStep)
    : m_out(out), m_bar(bar), m_first(firstStep), m_last(lastStep) {}

void ProgressReporter::step(Index step, double loss, std::optional<double> valLoss,
                            double tokensPerSecond, double secondsPerStep, double etaSeconds) {
  if (valLoss) m_lastVal = valLoss;
  const double eta = etaSeconds;
  const std::string val = m_lastVal ? fmt::format(" | val {:.4f}", *m_lastVal) : "";
  if (m_bar) {
    constexpr int kWidth = 24;
    const double done = m_last > m_first ? static_cast<double>(step - m_first) / static_cast<double>(m_last - m_first) : 1.0;
    const int filled = static_cast<int>(done * kWidth);
    m_out << fmt::format("\r[{}{}] step {}/{} | loss {:.4f}{} | {:.0f} tok/s | ETA {}\x1b[K",
                         std::string(static_cast<std::size_t>(filled), '#'),
                         std::string(static_cast<std::size_t>(kWidth - filled), '.'), step, m_last, loss,
                         val, tokensPerSecond, formatDuration(eta));
    m_open = true;
  } else {
    m_out << fmt::format("step {}/{}: train loss {:.6f}{} | {:.0f} tokens/s | {:.3f} s/step | ETA {}\n",
                         step, m_last, loss,
                         valLoss ? fmt::format(" | val loss {:.6f}", *valLoss) : std::string(),
                         tokensPerSecond, secondsPerStep, formatDuration(eta));
  }
  m_out.flush();
}

void ProgressReporter::note(const std::string& line) {
  finish();
  m_out << line << "\n";
  m_out.flush();
}

void ProgressReporter::finish() {
  if (m_open) m_out << "\n";
  m_open = false;
  m_out.flush();
}

osprey::Result<LossHistory> LossHistory::open(const std::filesystem::path& path, Index keepThrough) {
  const std::string header = "step,train_loss,val_loss,tokens_per_s\n";
  std::string kept = header;
  if (keepThrough > 0) {
    std::ifstream in(path);
    std::string line;
    bool first = true;
    while (std::getline(in, line)) {
      if (first) {
        first = false;
        continue;  // the header
      }
      std::istringstream fields(line);
      long long step = -1;
      if (fields >> step && step >= 1 && step <= keepThrough) kept += line + "\n";
    }
  }
  OSPREY_CHECK(osprey::io::writeFileAtomic(path.string(), kept));
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return osprey::Error{fmt::format("{}: cannot open the loss history for appending", path.string())};
  return LossHistory(path, f);
}

LossHistory::LossHistory(LossHistory&& other) noexcept : m_path(std::move(other.m_path)), m_file(other.m_file) {
  other.m_file = nullptr;
}

LossHistory::~LossHistory() {
  if (m_file) std::fclose(m_file);
}

osprey::Result<void> LossHistory::append(Index step, double trainLoss, std::optional<double> valLoss,
                                         double tokensPerSecond) {
  const std::string row = fmt::format("{},{:.17g},{},{:.1f}\n", step, trainLoss,
                                      valLoss ? fmt::format("{:.17g}", *valLoss) : std::string(),
                                      tokensPerSecond);
  if (std::fputs(row.c_str(), m_file) < 0 || std::fflush(m_file) != 0)
    return osprey::Error{fmt::format("{}: cannot write the loss history", m_path.string())};
  return {};
}

}  // namespace gpt2::train
