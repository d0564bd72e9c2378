// Data-parallel plumbing that needs no GPU: the launchers' rank variables, the --gpus launcher
// (each rank's environment, a failing or killed rank stopping the others, a program that cannot
// start), and the command line's errors for runs that cannot be data-parallel.
#include <gtest/gtest.h>

#include "files.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "gpt2/train/launch.hpp"
#include "gpt2/train/rank_env.hpp"

namespace fs = std::filesystem;
using namespace gpt2::train;

namespace {

EnvironmentLookup lookup(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(RankEnvironment, NoLauncherMeansOneProcess) {
  auto r = rankFromEnvironment(lookup({{"HOME", "/root"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(RankEnvironment, ReadsEachLauncherFamily) {
  struct Case {
    std::map<std::string, std::string> vars;
    int rank, size, local;
    std::string source;
  };
  const std::vector<Case> cases = {
      {{{"OSPREY_RANK", "1"}, {"OSPREY_WORLD_SIZE", "2"}, {"OSPREY_LOCAL_RANK", "1"}}, 1, 2, 1, "OSPREY_RANK"},
      {{{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}, 5, 8, 1, "RANK"},
      {{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}, 3, 4, 3,
       "OMPI_COMM_WORLD_RANK"},
      {{{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}, 2, 4, 2, "PMI_RANK"},  // no local rank: one host
      {{{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "6"}}, 6, 16, 6, "SLURM_PROCID"},
      // Osprey's own variables win over an outer launcher's.
      {{{"OSPREY_RANK", "0"}, {"OSPREY_WORLD_SIZE", "2"}, {"RANK", "7"}, {"WORLD_SIZE", "9"}}, 0, 2, 0, "OSPREY_RANK"},
  };
  for (const Case& c : cases) {
    auto r = rankFromEnvironment(lookup(c.vars));
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(r->has_value()) << c.source;
    EXPECT_EQ((*r)->rank, c.rank) << c.source;
    EXPECT_EQ((*r)->size, c.size) << c.source;
    EXPECT_EQ((*r)->localRank, c.local) << c.source;
    EXPECT_EQ((*r)->source, c.source);
  }
}

TEST(RankEnvironment, MalformedValuesAreErrorsNamingTheVariable) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"RANK", "1"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"RANK", "two"}, {"WORLD_SIZE", "4"}}, "RANK=\"two\" is not a rank number"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "4"}}, "RANK=\"-1\" is not a rank number"},
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK=4 is outside 0..3"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "at least one rank"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}}, "LOCAL_RANK=\"x\""},
  };
  for (const auto& [vars, expected] : cases) {
    auto r = rankFromEnvironment(lookup(vars));
    ASSERT_FALSE(r.ok()) << expected;
    EXPECT_NE(r.error().message.find(expected), std::string::npos) << r.error().message;
  }
}

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("osprey-launch-" + std::to_string(::getpid()));
  Scratch() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() { fs::remove_all(path); }
};

LaunchPlan shellPlan(const std::string& script, int ranks, const fs::path& dir) {
  LaunchPlan plan;
  plan.program = "/bin/sh";
  plan.args = {"sh", "-c", script};
  plan.ranks = ranks;
  plan.environment = {{"SCRATCH", dir.string()}};
  plan.graceSeconds = 1.0;
  return plan;
}

using osprey::testing::readText;

TEST(Launcher, EveryRankGetsItsPlace) {
  Scratch dir;
  std::ostringstream err;
  auto r = launchRanks(shellPlan("echo $OSPREY_RANK $OSPREY_WORLD_SIZE $OSPREY_LOCAL_RANK $OSPREY_CUDA_DEVICE "
                                 "$NCCL_NVLS_ENABLE $OSPREY_RENDEZVOUS > $SCRATCH/rank$OSPREY_RANK",
                                 3, dir.path),
                       err);
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::string rendezvous;
  for (int rank = 0; rank < 3; ++rank) {
    std::istringstream line(readText(dir.path / ("rank" + std::to_string(rank))));
    int k = -1, n = 0, local = -1, device = -1;
    std::string nvls, file;
    line >> k >> n >> local >> device >> nvls >> file;
    EXPECT_EQ(k, rank);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(local, rank);
    EXPECT_EQ(device, rank);
    if (std::getenv("NCCL_NVLS_ENABLE") == nullptr) {
      EXPECT_EQ(nvls, "0");
    }
    if (rank == 0) rendezvous = file;
    EXPECT_EQ(file, rendezvous) << "all ranks meet at the same file";
  }
  // The private directory the ranks met in is gone afterwards.
  EXPECT_FALSE(rendezvous.empty());
  EXPECT_FALSE(fs::exists(fs::path(rendezvous).parent_path()));
}

TEST(Launcher, AFailingRankStopsTheOthersAndIsNamed) {
  Scratch dir;
  std::ostringstream err;
  const auto start = std::chrono::steady_clock::now();
  auto r = launchRanks(shellPlan("if [ $OSPREY_RANK = 1 ]; then exit 3; fi; sleep 60", 3, dir.path), err);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("rank 1 of 3 exited with status 3; the other ranks were stopped"),
            std::string::npos) << r.error().message;
  EXPECT_LT(seconds, 20.0) << "the sleeping ranks were not stopped";
}

TEST(Launcher, AKilledRankIsReportedWithItsSignal) {
  Scratch dir;
  std::ostringstream err;
  auto r = launchRanks(shellPlan("if [ $OSPREY_RANK = 0 ]; then kill -9 $$; fi; sleep 60", 2, dir.path), err);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("rank 0 of 2 was killed by signal 9"), std::string::npos) << r.error().message;
}

TEST(Launcher, AProgramThatCannotStartIsAnError) {
  Scratch dir;
  std::ostringstream err;
  LaunchPlan plan = shellPlan("", 2, dir.path);
  plan.program = (dir.path / "no-such-program").string();
  auto r = launchRanks(plan, err);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("exited with status 127"), std::string::npos) << r.error().message;
  EXPECT_FALSE(launchRanks(shellPlan("true", 0, dir.path), err).ok());
}

TEST(Launcher, AllRanksSucceeding) {
  Scratch dir;
  std::ostringstream err;
  EXPECT_TRUE(launchRanks(shellPlan("exit 0", 4, dir.path), err).ok());
}

// Sets environment variables for one test, then removes them.
struct ScopedVariables {
  std::vector<std::string> names;
  explicit ScopedVariables(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [n, v] : vars) {
      ::setenv(n.c_str(), v.c_str(), 1);
      names.push_back(n);
    }
  }
  ~ScopedVariables() {
    for (const auto& n : names) ::unsetenv(n.c_str());
  }
};

using osprey::testing::train::CliRun;

CliRun train(std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", "--preset", "tiny", "--data", "/nonexistent/text.txt",
                                   "--steps", "1", "--batch", "4", "--seq", "8"};
  args.insert(args.end(), extra.begin(), extra.end());
  return osprey::testing::train::runOsprey(args);
}

TEST(DataParallelCli, RunsThatCannotBeDataParallelAreClearErrors) {
  {
    auto r = train({"--gpus", "2", "--backend", "lists"});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("--gpus 2 runs one process per GPU: it needs --backend gpu --device cuda"),
              std::string::npos) << r.err;
  }
  {
    auto r = train({"--grad-sum", "sometimes"});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("unknown --grad-sum `sometimes`: choose exact or allreduce"), std::string::npos) << r.err;
  }
  {
    ScopedVariables vars({{"OSPREY_RANK", "1"}, {"OSPREY_WORLD_SIZE", "2"}});
    auto r = train({"--backend", "gpu", "--device", "host"});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("give --rendezvous FILE"), std::string::npos) << r.err;
    auto disagree = train({"--gpus", "4"});
    EXPECT_NE(disagree.err.find("--gpus 4 disagrees with the launcher's 2 ranks (OSPREY_RANK)"), std::string::npos)
        << disagree.err;
  }
  {
    ScopedVariables vars({{"WORLD_SIZE", "2"}, {"RANK", "abc"}});
    auto r = train({});
    EXPECT_NE(r.err.find("RANK=\"abc\" is not a rank number"), std::string::npos) << r.err;
  }
}

}  // namespace
