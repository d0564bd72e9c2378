// Shared by the hostile-input training tests (hostile_*_test.cpp): a small text to train on, a
// tiny run through the in-process command line, and a snapshot of a directory's bytes to prove
// that a refused or failed run changed nothing.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "files.hpp"
#include "gpt2/train/checkpoint.hpp"

namespace osprey::testing::train {

using osprey::testing::readText;
using osprey::testing::writeText;

// `train` on the tiny preset, gpu/host, batch 2 x 8, with `extra` options.
inline CliRun tinyTrain(const std::string& data, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", "--backend", "gpu", "--data", data, "--batch", "2", "--seq", "8"};
  args.insert(args.end(), extra.begin(), extra.end());
  return runOsprey(args);
}

// One step of `train` on the tiny preset saved to `run`: where a resume or overwrite test starts.
inline CliRun saveOneStep(const std::string& data, const std::filesystem::path& run) {
  return tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", run.string()});
}

// The manifest a resume of `run` reads (what the tests damage).
inline std::filesystem::path trainerStateOf(const std::filesystem::path& run) {
  return gpt2::train::checkpointDir(run) / "trainer_state.json";
}

// Every regular file under dir (relative path -> bytes).
inline std::map<std::string, std::string> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file())
      files[std::filesystem::relative(entry.path(), dir).string()] = readText(entry.path());
  return files;
}

}  // namespace osprey::testing::train
