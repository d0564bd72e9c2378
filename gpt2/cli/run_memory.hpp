// The device memory a run needed, for the lines that report a run's cost: the most bytes its
// buffers held at once, where the handler's device keeps that count (the cuda device does; host
// memory is the operating system's to report).
#pragma once

#include <string>

#include <fmt/format.h>

namespace gpt2 {

// "; peak device memory 12.34 GiB", or "" where the device does not count.
template <class H>
std::string peakMemoryNote(const H& h) {
  if constexpr (requires { h.runtime()->peakLiveBytes(); }) {
    const double gib = static_cast<double>(h.runtime()->peakLiveBytes()) / (1024.0 * 1024.0 * 1024.0);
    return fmt::format("; peak device memory {:.2f} GiB", gib);
  } else {
    return {};
  }
}

}  // namespace gpt2
