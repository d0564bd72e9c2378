// Running osprey-gpt2's command line in-process (gpt2::runCli with the host handlers), keeping
// its exit status, stdout and stderr for a test to check.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "gpt2/cli/cli.hpp"
#include "gpt2/cli/run.hpp"

namespace osprey::testing::train {

struct CliRun {
  int status = 0;
  std::string out, err;
};

// `osprey-gpt2 <args...>`.
inline CliRun runOsprey(std::vector<std::string> args) {
  args.insert(args.begin(), "osprey-gpt2");
  std::ostringstream out, err;
  CliRun r;
  r.status = gpt2::runCli(args, gpt2::hostEntries(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// A few kilobytes of text: enough tokens for 2 x 8 batches in both splits.
inline std::string sampleTrainingText() {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. " +
            std::to_string(i) + "\n";
  return text;
}

// A run's output after its header line (all of it when it has one line).
inline std::string afterHeaderLine(const std::string& s) { return s.substr(s.find('\n') + 1); }

}  // namespace osprey::testing::train
