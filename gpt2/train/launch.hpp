// `osprey-gpt2 train --gpus N`: the launcher. It starts N copies of the program, one per GPU,
// each told its place through OSPREY_RANK / OSPREY_WORLD_SIZE / OSPREY_LOCAL_RANK (see
// train_rank_env.hpp), its GPU through OSPREY_CUDA_DEVICE, and where to meet through
// OSPREY_RENDEZVOUS (a file in a fresh private directory, removed afterwards); then it waits.
//
//   * every rank exits 0: the launcher exits 0;
//   * a rank fails or is killed: the others get SIGTERM (SIGKILL after a grace period), and the
//     launcher returns an error naming the first rank that failed and how; so a dead rank never
//     leaves the others waiting on a collective;
//   * Ctrl-C (SIGINT), SIGTERM or SIGHUP to the launcher: passed on once to every rank, which finish
//     their step, save, and exit; the ranks run in their own process group, so a terminal's
//     Ctrl-C reaches them once, through the launcher, not twice.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "osprey/result.hpp"

namespace gpt2::train {

struct LaunchPlan {
  std::string program;                 // what each rank runs (usually /proc/self/exe)
  std::vector<std::string> args;       // its arguments, args[0] the program's name
  int ranks = 1;
  std::vector<std::pair<std::string, std::string>> environment;  // added for every rank
  double graceSeconds = 10.0;          // between SIGTERM and SIGKILL when stopping ranks
};

// The variables rank `rank` of `plan` starts with, beyond the launcher's own environment.
std::vector<std::pair<std::string, std::string>> rankEnvironment(const LaunchPlan& plan, int rank,
                                                                 const std::string& rendezvous);

osprey::Result<void> launchRanks(const LaunchPlan& plan, std::ostream& err);

}  // namespace gpt2::train
