// Whole files as strings, for the tests that write inputs and read outputs.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace osprey::testing {

// Writes `bytes` to `path` (replacing it) and returns the path.
inline std::filesystem::path writeText(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Everything in `path` ("" when it cannot be read).
inline std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace osprey::testing
