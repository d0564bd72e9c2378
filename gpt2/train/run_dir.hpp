// Claiming a --save directory for one training run, before anything runs:
//
//   * Lost work: a directory that already holds a run (checkpoint/, checkpoint.old-*, a loss.csv
//     with at least one step) is refused unless this run continues it (--resume from that same
//     directory) or --overwrite says to replace it.
//   * Two runs, one directory: the run holds an exclusive flock on DIR/osprey-train.lock for its
//     whole life and writes its pid there; a second run fails at once, naming that pid. The lock
//     goes with the process (the kernel drops it however the process ends), so a killed run
//     never leaves the directory locked. The file itself stays (removing it would race with a
//     run opening it).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "osprey/result.hpp"

namespace gpt2::train {

inline constexpr const char* kLockFile = "osprey-train.lock";

// Holds the lock until destroyed.
class RunDirectoryLock {
 public:
  explicit RunDirectoryLock(int fd) : m_fd(fd) {}
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

 private:
  int m_fd;
};

// Creates saveDir if needed and locks it (see the file comment).
osprey::Result<std::unique_ptr<RunDirectoryLock>> lockRunDirectory(const std::filesystem::path& saveDir);

// The first file or directory in saveDir that belongs to a training run, or nullopt.
std::optional<std::filesystem::path> existingRun(const std::filesystem::path& saveDir);

// Whether `resume` (a --resume argument: a save directory, its checkpoint/ or a checkpoint.old-*)
// is saveDir's own run.
bool resumesFrom(const std::filesystem::path& saveDir, const std::filesystem::path& resume);

// Both rules, in the order a user needs them: a directory in use is reported as such, before
// anything is said about what it holds.
osprey::Result<std::unique_ptr<RunDirectoryLock>> claimRunDirectory(const std::filesystem::path& saveDir,
                                                                     const std::optional<std::filesystem::path>& resume,
                                                                     bool overwrite);

}  // namespace gpt2::train
