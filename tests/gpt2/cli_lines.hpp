// The lines of a command's output that the CLI tests compare.
#pragma once

#include <string>

namespace gpt2::testing {

// What follows the header line ("" when there is no second line).
inline std::string afterFirstLine(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? "" : s.substr(nl + 1);
}

}  // namespace gpt2::testing
