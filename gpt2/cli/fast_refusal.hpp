// The words of a refusal of the fast backend, shared by the CLI (run_select.cpp) and the Python
// module (python/src/gpt2_open.cpp), so both say the same thing.
//
// The fast backend runs on the cuda device only: OSPREY_GPU chooses the gpu backend's device and
// does not apply to it. Opening the cuda device words its advice for the gpu backend ("or choose
// OSPREY_GPU=host"), which would send a user who gave OSPREY_GPU=host with --backend fast in a
// circle: for fast, that advice is dropped, and the error says what fast needs and what was given.
#pragma once

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "osprey/result.hpp"

namespace gpt2 {

inline osprey::Error fastRefusal(const osprey::Error& error) {
  std::string message = error.message;
  bool advised = false;
  for (const std::string advice : {", or choose OSPREY_GPU=host", " or choose OSPREY_GPU=host"})
    for (std::size_t at; (at = message.find(advice)) != std::string::npos; advised = true) message.erase(at, advice.size());
  if (const char* env = std::getenv("OSPREY_GPU"))
    message += fmt::format("; OSPREY_GPU={} was given, but OSPREY_GPU picks the gpu backend's device and does not "
                           "apply to fast",
                           *env ? env : "\"\"");
  if (advised)
    message += ": --backend fast needs the cuda device (an NVIDIA GPU); to run on the host instead, choose "
               "--backend gpu --device host, or --backend lists";
  return osprey::Error{message};
}

}  // namespace gpt2
