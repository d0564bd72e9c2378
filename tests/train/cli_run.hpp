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

}  // namespace osprey::testing::train
