// The previous checkpoints that interrupted saves leave behind, and which one to trust.
//
// A save on a file system without an atomic exchange moves DIR/checkpoint aside to
// DIR/checkpoint.old-<pid> for a moment (checkpoint.hpp); killed in that window, it leaves DIR
// without a checkpoint/ and with one or more old-* (several when several runs were killed so).
// The rule for choosing, the same for the loader and for the next save: the old-* whose manifest
// has the largest step; of equal steps, the last name in byte order. The pid in the name says
// nothing about age (pids wrap), and modification times change when a directory is copied.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>

#include "osprey/config.hpp"

namespace gpt2::train {

struct OldCheckpoint {
  std::filesystem::path dir;
  osprey::Index step = 0;
  std::size_t candidates = 0;  // old-* directories with a readable manifest
};

// The newest DIR/checkpoint.old-* with a readable manifest, or nullopt.
std::optional<OldCheckpoint> newestOldCheckpoint(const std::filesystem::path& saveDir);

}  // namespace gpt2::train
