// osprey-gpt2 on the opencl device, in-process: generate, logits and train-step print what the
// lists backend prints after the header line, which names the device.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "files.hpp"
#include "gpt2/cli/cli.hpp"
#include "gpt2/cli/run.hpp"
#include "gpt2/temp_dir.hpp"
#include "train/cli_run.hpp"

namespace osprey::testing {
namespace {

struct Outcome {
  int status = 0;
  std::string out, err;
};

Outcome run(std::vector<std::string> args) {
  args.insert(args.begin(), "osprey-gpt2");
  gpt2::HandlerEntries entries = gpt2::hostEntries();
  entries.gpuOpenCl = &gpt2::runJobOnGpuOpenCl;
  std::ostringstream out, err;
  Outcome r;
  r.status = gpt2::runCli(args, entries, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// The command on lists and on opencl: both succeed, the header names the device, the rest is equal.
void sameAsLists(std::vector<std::string> args) {
  auto onLists = args, onOpenCl = args;
  onLists.insert(onLists.end(), {"--backend", "lists"});
  onOpenCl.insert(onOpenCl.end(), {"--backend", "gpu", "--device", "opencl"});
  const Outcome a = run(onLists), b = run(onOpenCl);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(b.out.rfind("gpt2 (tiny) on opencl: ", 0), 0u) << b.out.substr(0, 80);
  const std::string restA = train::afterHeaderLine(a.out), restB = train::afterHeaderLine(b.out);
  EXPECT_FALSE(restA.empty());
  EXPECT_EQ(restA, restB);
}

TEST(CliOnOpenCl, GenerateIsListsAfterTheHeader) {
  sameAsLists({"generate", "--preset", "tiny", "--prompt", "The capital of France is", "--tokens", "20"});
}

TEST(CliOnOpenCl, SampledGenerateIsListsAfterTheHeader) {
  sameAsLists({"generate", "--preset", "tiny", "--prompt", "The capital of France is", "--tokens", "20",
               "--temperature", "1", "--top-k", "40", "--seed", "7"});
}

TEST(CliOnOpenCl, LogitsAreListsAfterTheHeader) {
  sameAsLists({"logits", "--preset", "tiny", "--prompt", "Hello, world"});
}

TEST(CliOnOpenCl, TrainStepIsListsAfterTheHeader) {
  gpt2::testing::TempDir dir;
  const std::string data = (dir.path() / "text.txt").string();
  writeText(data, train::sampleTrainingText());
  sameAsLists({"train-step", "--preset", "tiny", "--data", data, "--batch", "2", "--seq", "8"});
}

}  // namespace
}  // namespace osprey::testing
