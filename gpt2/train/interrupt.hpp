// Stop requests during training: SIGINT (Ctrl-C), SIGTERM (kill, a scheduler's preemption) and
// SIGHUP (the terminal went away) all only raise a flag; the loop finishes the step it is in,
// saves a final checkpoint and exits as it does after Ctrl-C (status 0, saying which signal).
// A second signal of the three restores the default actions, so a user who presses Ctrl-C twice
// still gets an immediate stop. A signal the process was started ignoring (nohup's SIGHUP, a
// background job's SIGINT) stays ignored.
#pragma once

namespace gpt2::train {

// Installs the handlers for the lifetime of the object and restores the previous ones after.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// Whether a stop was requested since the guard was installed.
bool interruptRequested();

// The signal that asked ("SIGTERM"; "a request" for requestInterrupt), or "" when none did.
const char* interruptSource();

// Raises the flag as SIGINT would (tests; and a programmatic stop).
void requestInterrupt();

}  // namespace gpt2::train
