// The --gpus launcher (train_launch.hpp): fork/exec of one process per rank, a wait loop that
// stops every rank when one fails, and signal forwarding.
#include "gpt2/train/launch.hpp"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

extern char** environ;

namespace gpt2::train {
namespace {

volatile sig_atomic_t g_pendingSignal = 0;

void rememberSignal(int sig) { g_pendingSignal = sig; }

// SIGINT, SIGTERM and SIGHUP are remembered (and passed on by the wait loop) while the ranks run:
// each rank then finishes its step and saves (interrupt.hpp). A signal the launcher was started
// ignoring (nohup's SIGHUP) stays ignored.
class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction action {};
    action.sa_handler = rememberSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &m_int);
    sigaction(SIGTERM, &action, &m_term);
    sigaction(SIGHUP, nullptr, &m_hup);
    if (m_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &action, nullptr);
    g_pendingSignal = 0;
  }
  ~ForwardSignals() {
    sigaction(SIGINT, &m_int, nullptr);
    sigaction(SIGTERM, &m_term, nullptr);
    sigaction(SIGHUP, &m_hup, nullptr);
  }
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;

 private:
  struct sigaction m_int {}, m_term {}, m_hup {};
};

// One rank's argv and envp, built before fork (allocating after fork is unsafe).
struct RankCommand {
  std::vector<std::string> argStrings, envStrings;
  std::vector<char*> argv, envp;
};

RankCommand rankCommand(const LaunchPlan& plan, int rank, const std::string& rendezvous) {
  RankCommand c;
  c.argStrings = plan.args;
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : rankEnvironment(plan, rank, rendezvous)) env[name] = value;
  for (const auto& [name, value] : env) c.envStrings.push_back(name + "=" + value);
  for (auto& s : c.argStrings) c.argv.push_back(s.data());
  c.argv.push_back(nullptr);
  for (auto& s : c.envStrings) c.envp.push_back(s.data());
  c.envp.push_back(nullptr);
  return c;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return fmt::format("stopped with wait status {}", status);
}

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// A fresh private directory for the rendezvous file, under $TMPDIR (else /tmp).
osprey::Result<std::filesystem::path> privateDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = fmt::format("{}/osprey-ranks-XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
  if (::mkdtemp(pattern.data()) == nullptr)
    return osprey::Error{fmt::format("cannot create a directory for the ranks to meet in ({}): {}", pattern,
                                     std::strerror(errno))};
  return std::filesystem::path(pattern);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> rankEnvironment(const LaunchPlan& plan, int rank,
                                                                 const std::string& rendezvous) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"OSPREY_RANK", std::to_string(rank)},
      {"OSPREY_WORLD_SIZE", std::to_string(plan.ranks)},
      {"OSPREY_LOCAL_RANK", std::to_string(rank)},
      {"OSPREY_CUDA_DEVICE", std::to_string(rank)},
      {"OSPREY_RENDEZVOUS", rendezvous},
  };
  // NVLink multicast stays off unless the caller's environment explicitly says otherwise.
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  env.emplace_back("NCCL_NVLS_ENABLE", nvls != nullptr ? nvls : "0");
  for (const auto& extra : plan.environment) env.push_back(extra);
  return env;
}

osprey::Result<void> launchRanks(const LaunchPlan& plan, std::ostream& err) {
  using Clock = std::chrono::steady_clock;
  if (plan.ranks < 1) return osprey::Error{fmt::format("--gpus {}: at least one is needed", plan.ranks)};
  if (plan.args.empty()) return osprey::Error{"the launcher was given no command line to run"};
  const std::filesystem::path dir = OSPREY_TRY(privateDirectory());
  const std::string rendezvous = (dir / "nccl-id").string();
  std::vector<RankCommand> commands;
  for (int r = 0; r < plan.ranks; ++r) commands.push_back(rankCommand(plan, r, rendezvous));

  ForwardSignals forwarding;
  err.flush();
  std::vector<pid_t> pids(static_cast<std::size_t>(plan.ranks), -1);
  pid_t group = 0;
  std::optional<std::string> failure;
  auto stopAll = [&](int sig) {
    if (group > 0) ::kill(-group, sig);
  };
  for (int r = 0; r < plan.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      failure = fmt::format("cannot start rank {}: fork failed: {}", r, std::strerror(errno));
      break;
    }
    if (pid == 0) {
      ::setpgid(0, group);  // the first rank founds the group (group == 0), the rest join it
      RankCommand& c = commands[static_cast<std::size_t>(r)];
      ::execve(plan.program.c_str(), c.argv.data(), c.envp.data());
      const std::string message = fmt::format("osprey-gpt2: error: rank {}: cannot run {}: {}\n", r, plan.program,
                                              std::strerror(errno));
      [[maybe_unused]] auto written = ::write(STDERR_FILENO, message.data(), message.size());
      ::_exit(127);
    }
    ::setpgid(pid, group == 0 ? pid : group);  // also from here: whichever runs first wins the race
    if (group == 0) group = pid;
    pids[static_cast<std::size_t>(r)] = pid;
  }

  int alive = 0;
  for (pid_t p : pids) alive += p > 0 ? 1 : 0;
  // After the first failure: SIGTERM now, SIGKILL at killAt to whatever is still running.
  const auto grace = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(plan.graceSeconds));
  bool killPending = false;
  Clock::time_point killAt{};
  auto beginStopping = [&] {
    stopAll(SIGTERM);
    killPending = true;
    killAt = Clock::now() + grace;
  };
  if (failure) beginStopping();
  while (alive > 0) {
    if (const int sig = g_pendingSignal; sig != 0) {
      g_pendingSignal = 0;
      stopAll(sig);
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      for (int r = 0; r < plan.ranks; ++r) {
        if (pids[static_cast<std::size_t>(r)] != done) continue;
        pids[static_cast<std::size_t>(r)] = -1;
        --alive;
        if (!succeeded(status) && !failure) {
          failure = fmt::format("rank {} of {} {}; the other ranks were stopped", r, plan.ranks, describeStatus(status));
          beginStopping();
        }
      }
      continue;
    }
    if (done < 0 && errno == ECHILD) break;
    if (killPending && Clock::now() >= killAt) {
      stopAll(SIGKILL);
      killPending = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (failure) return osprey::Error{*failure};
  return {};
}

}  // namespace gpt2::train
