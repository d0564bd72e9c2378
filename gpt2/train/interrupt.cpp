// The stop flag (see interrupt.hpp). Only async-signal-safe work happens in the handler: stores
// to lock-free atomics and calls to sigaction().
#include "gpt2/train/interrupt.hpp"

#include <signal.h>

#include <atomic>

namespace gpt2::train {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kSignalCount = sizeof kSignals / sizeof kSignals[0];
constexpr int kRequested = -1;  // g_signal's value after requestInterrupt()

std::atomic<int> g_signal{0};  // 0: no request; else the signal number (or kRequested)
static_assert(std::atomic<int>::is_always_lock_free, "the flag must be safe to set in a signal handler");

struct sigaction g_previous[kSignalCount];
bool g_installed[kSignalCount] = {};

extern "C" void onStopSignal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  // The next one is not caught: it stops the process at once.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int i = 0; i < kSignalCount; ++i)
    if (g_installed[i]) sigaction(kSignals[i], &dfl, nullptr);
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kSignalCount; ++i) {
    g_installed[i] = false;
    if (sigaction(kSignals[i], nullptr, &g_previous[i]) != 0) continue;
    if (g_previous[i].sa_handler == SIG_IGN) continue;  // nohup, or a background job: stays ignored
    g_installed[i] = sigaction(kSignals[i], &action, nullptr) == 0;
  }
}

InterruptGuard::~InterruptGuard() {
  for (int i = 0; i < kSignalCount; ++i)
    if (g_installed[i]) sigaction(kSignals[i], &g_previous[i], nullptr);
  for (bool& installed : g_installed) installed = false;
}

bool interruptRequested() { return g_signal.load() != 0; }

const char* interruptSource() {
  switch (g_signal.load()) {
    case 0: return "";
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a request";
  }
}

void requestInterrupt() {
  int none = 0;
  g_signal.compare_exchange_strong(none, kRequested);
}

}  // namespace gpt2::train
