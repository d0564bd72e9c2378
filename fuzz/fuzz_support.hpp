// Shared by the fuzz targets: a promise check, and scratch files for readers that take a path.
//
// Each process gets its own scratch directory, made under $TMPDIR (or /tmp) on first use and
// removed when the process exits normally (a crash leaves it behind; run-fuzzers.sh points
// TMPDIR into its build folder, so leftovers stay there). Parallel replays and fuzzing jobs never
// share a file.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace osprey_fuzz {

// A broken promise aborts, which the fuzzer (or the replay) reports as a crash.
inline void require(bool promise, const char* what = "a promise") {
  if (!promise) {
    std::fprintf(stderr, "osprey fuzz: broken: %s\n", what);
    std::abort();
  }
}

inline bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Aborts with a message when the scratch area itself fails (not the reader's fault, but nothing
// the target can go on without).
[[noreturn]] inline void scratchFailure(const std::string& what) {
  std::fprintf(stderr, "osprey fuzz: scratch: %s\n", what.c_str());
  std::abort();
}

// This process's scratch directory.
inline const std::filesystem::path& scratchDir() {
  struct Scratch {
    std::filesystem::path dir;
    Scratch() {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/osprey-fuzz-XXXXXX";
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(pattern).parent_path(), ec);
      if (::mkdtemp(pattern.data()) == nullptr) scratchFailure("cannot create " + pattern);
      dir = pattern;
    }
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static const Scratch scratch;
  return scratch.dir;
}

// Replaces the file at `path` with exactly these bytes.
inline void writeBytes(const std::filesystem::path& path, const void* data, std::size_t size) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) scratchFailure("cannot write " + path.string());
  const bool ok = (size == 0 || std::fwrite(data, 1, size, out) == size);
  if (std::fclose(out) != 0 || !ok) scratchFailure("cannot write " + path.string());
}

inline void writeBytes(const std::filesystem::path& path, std::string_view bytes) {
  writeBytes(path, bytes.data(), bytes.size());
}

}  // namespace osprey_fuzz
