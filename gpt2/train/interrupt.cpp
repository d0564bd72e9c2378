// The SIGINT flag (see train_interrupt.hpp). Only async-signal-safe work happens in the handler:
// a store to a lock-free atomic and a call to signal().
#include "gpt2/train/interrupt.hpp"

#include <atomic>
#include <csignal>

namespace gpt2::train {
namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the flag must be safe to set in a signal handler");

using SignalHandler = void (*)(int);
SignalHandler g_previous = SIG_DFL;

extern "C" void onInterrupt(int) {
  g_interrupted.store(true);
  // The next Ctrl-C is not caught: it stops the process at once.
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted.store(false);
  g_previous = std::signal(SIGINT, onInterrupt);
}

InterruptGuard::~InterruptGuard() { std::signal(SIGINT, g_previous == SIG_ERR ? SIG_DFL : g_previous); }

bool interruptRequested() { return g_interrupted.load(); }

void requestInterrupt() { g_interrupted.store(true); }

}  // namespace gpt2::train
