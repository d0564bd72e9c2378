// Ctrl-C during training: the first SIGINT only raises a flag; the loop finishes the step it is
// in, saves a final checkpoint and exits cleanly. A second SIGINT restores the default action,
// so a user who presses Ctrl-C twice still gets an immediate stop.
#pragma once

namespace gpt2::train {

// Installs the handler for the lifetime of the object and restores the previous one after.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// Whether SIGINT arrived since the guard was installed.
bool interruptRequested();

// Raises the flag as SIGINT would (tests; and a programmatic stop).
void requestInterrupt();

}  // namespace gpt2::train
