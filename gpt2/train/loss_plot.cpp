// The loss curve, drawn by gnuplot (see loss_plot.hpp).
#include "gpt2/train/loss_plot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "osprey/io/atomic_file.hpp"

extern char** environ;

namespace gpt2::train {
namespace {

namespace fs = std::filesystem;

// A gnuplot single-quoted string: nothing is special inside but the quote, written twice.
std::string gnuplotString(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// Whether loss.csv has a row after its header.
bool recordsAStep(const fs::path& csv) {
  std::ifstream in(csv);
  std::string line;
  if (!std::getline(in, line)) return false;
  while (std::getline(in, line))
    if (!line.empty()) return true;
  return false;
}

// The last non-empty line of gnuplot's messages, for the note.
std::string lastLine(const std::string& text) {
  std::size_t end = text.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "no message";
  const std::size_t start = text.find_last_of('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

struct Ran {
  int spawnError = 0;  // errno of posix_spawnp (ENOENT: no such program)
  int status = 0;      // waitpid's status
  std::string messages;
};

// `program script` with stdin and stdout on /dev/null and stderr collected.
Ran runProgram(const std::string& program, const std::string& script) {
  Ran ran;
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) {
    ran.spawnError = errno;
    return ran;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], STDERR_FILENO);
  std::vector<char*> argv = {const_cast<char*>(program.c_str()), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = -1;
  ran.spawnError = ::posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipeFds[1]);
  if (ran.spawnError == 0) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(pipeFds[0], buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (ran.messages.size() < (1u << 16)) ran.messages.append(buffer, static_cast<std::size_t>(n));
    }
    while (::waitpid(pid, &ran.status, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(pipeFds[0]);
  return ran;
}

}  // namespace

fs::path lossCurveProgramPath(const fs::path& saveDir) { return saveDir / "loss.gp"; }
fs::path lossCurvePath(const fs::path& saveDir) { return saveDir / "loss.png"; }

std::string lossCurveProgram(std::string_view title) {
  std::string heading(title);
  for (char& c : heading)
    if (c == '\n' || c == '\r' || c == '\0') c = ' ';
  return fmt::format(
      "# The loss curve of an osprey-gpt2 training run (gpt2/train/loss_plot.hpp): `gnuplot DIR/loss.gp`\n"
      "# draws DIR/loss.png from the rows of DIR/loss.csv written so far (step,train_loss,val_loss,tokens_per_s;\n"
      "# val_loss is empty between validations). DIR is this file's own directory, wherever it was moved.\n"
      "here = exists('ARG0') ? ARG0 : ''\n"
      "cut = 0\n"
      "do for [k = 1:strlen(here)] {{ if (here[k:k] eq '/') {{ cut = k }} }}\n"
      "dir = cut > 0 ? here[1:cut] : ''\n"
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {{\n"
      "  set terminal pngcairo size 960,600 font ',11'\n"
      "}} else {{\n"
      "  set terminal png size 960,600\n"
      "}}\n"
      "set output dir.'loss.png'\n"
      "set datafile separator ','\n"
      "set title {title} noenhanced\n"
      "set xlabel 'step'\n"
      "set ylabel 'loss (nats per token)'\n"
      "set grid\n"
      "set key top right\n"
      "plot dir.'loss.csv' skip 1 using 1:2 with lines linewidth 1 linecolor rgb '#4477aa' title 'train', \\\n"
      "     dir.'loss.csv' skip 1 using 1:3 with linespoints pointtype 7 pointsize 0.7 linewidth 2 \\\n"
      "     linecolor rgb '#ee6677' title 'validation'\n",
      fmt::arg("title", gnuplotString(heading)));
}

osprey::Result<void> writeLossCurveProgram(const fs::path& saveDir, std::string_view title) {
  return osprey::io::writeFileAtomic(lossCurveProgramPath(saveDir).string(), lossCurveProgram(title));
}

LossCurveOutcome drawLossCurve(const fs::path& saveDir, const std::string& gnuplot) {
  const fs::path csv = saveDir / "loss.csv", gp = lossCurveProgramPath(saveDir), png = lossCurvePath(saveDir);
  if (!recordsAStep(csv)) return {false, ""};
  std::error_code ec;
  if (!fs::is_regular_file(gp, ec))
    return {false, fmt::format("loss curve not drawn: {} is missing", gp.string())};
  const std::string byHand = fmt::format("`gnuplot {}` draws {}", gp.string(), png.string());
  fs::remove(png, ec);  // a stale curve must not pass for this one
  const Ran ran = runProgram(gnuplot, gp.string());
  if (ran.spawnError == ENOENT)
    return {false, fmt::format("loss curve not drawn: {} is not installed (Debian: apt-get install gnuplot-nox); then {}",
                               gnuplot, byHand)};
  if (ran.spawnError != 0)
    return {false, fmt::format("loss curve not drawn: cannot run {}: {}; {}", gnuplot, std::strerror(ran.spawnError),
                               byHand)};
  const bool exited = WIFEXITED(ran.status) && WEXITSTATUS(ran.status) == 0;
  if (!exited || !fs::is_regular_file(png, ec)) {
    const std::string how = WIFEXITED(ran.status)   ? fmt::format("exit status {}", WEXITSTATUS(ran.status))
                            : WIFSIGNALED(ran.status) ? fmt::format("signal {}", WTERMSIG(ran.status))
                                                      : std::string("no status");
    return {false, fmt::format("loss curve not drawn: {} failed ({}): {}", gnuplot,
                               exited ? "no loss.png written" : how, lastLine(ran.messages))};
  }
  return {true, fmt::format("loss curve: {} (gnuplot {} redraws it)", png.string(), gp.string())};
}

}  // namespace gpt2::train
