// `osprey-gpt2 train-step` and `train` end to end (tiny preset, small batches): the same bytes on
// every handler, resume equal to an uninterrupted run bit for bit (even across handlers), Ctrl-C
// ending in a saved checkpoint, and bad data ending in clear errors.
#include <gtest/gtest.h>

#include "gpt2/temp_dir.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "gpt2/cli/cli.hpp"
#include "gpt2/cli/run.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "osprey/io/safetensors.hpp"
#include "cli_run.hpp"
#include "train_helpers.hpp"

namespace fs = std::filesystem;

namespace {

using osprey::testing::train::CliRun;
using osprey::testing::train::runOsprey;

using osprey::testing::train::sampleTrainingText;

fs::path writeFile(const fs::path& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return dir / name;
}

using osprey::testing::train::afterHeaderLine;

std::vector<std::string> column(const fs::path& csv, int index) {
  std::ifstream in(csv);
  std::string line;
  std::vector<std::string> out;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string field;
    for (int i = 0; i <= index; ++i) std::getline(fields, field, ',');
    out.push_back(field);
  }
  return out;
}

// Every tensor of two safetensors files, compared bit for bit.
void expectSameTensors(const fs::path& a, const fs::path& b) {
  auto fa = osprey::io::SafetensorsFile::open(a.string());
  auto fb = osprey::io::SafetensorsFile::open(b.string());
  ASSERT_TRUE(fa.ok() && fb.ok());
  ASSERT_EQ(fa->names(), fb->names());
  for (const auto& name : fa->names())
    EXPECT_TRUE(osprey::testing::train::sameBits(fa->read(name)->values, fb->read(name)->values)) << a << " " << name;
}

}  // namespace

TEST(TrainStepCli, SameBytesOnEveryHandlerAfterTheFirstLine) {
  gpt2::testing::TempDir dir;
  const auto data = writeFile(dir.path(), "text.txt", sampleTrainingText()).string();
  const std::vector<std::string> common = {"--preset", "tiny", "--data", data, "--batch", "2", "--seq", "8",
                                           "--weight-decay", "0.1"};
  auto args = [&](std::vector<std::string> backend) {
    std::vector<std::string> a = {"train-step"};
    a.insert(a.end(), backend.begin(), backend.end());
    a.insert(a.end(), common.begin(), common.end());
    return a;
  };
  const CliRun lists = runOsprey(args({"--backend", "lists"}));
  const CliRun host = runOsprey(args({"--backend", "gpu", "--device", "host"}));
  ASSERT_EQ(lists.status, 0) << lists.err;
  ASSERT_EQ(host.status, 0) << host.err;
  EXPECT_EQ(lists.out.substr(0, lists.out.find('\n')), "gpt2 (tiny) on lists");
  EXPECT_EQ(host.out.substr(0, host.out.find('\n')), "gpt2 (tiny) on host");
  EXPECT_EQ(afterHeaderLine(lists.out), afterHeaderLine(host.out));
  // header, description, loss, 28 gradient sums (tiny has 2 blocks), loss after the step
  EXPECT_EQ(std::count(lists.out.begin(), lists.out.end(), '\n'), 2 + 1 + 28 + 1) << lists.out;
  EXPECT_NE(lists.out.find("\ngrad h.1.mlp.c_proj.weight "), std::string::npos);
  EXPECT_NE(lists.out.find("\nloss after step "), std::string::npos);
}

TEST(TrainCli, ResumeEqualsUninterruptedBitForBit) {
  gpt2::testing::TempDir dir;
  const auto data = writeFile(dir.path(), "text.txt", sampleTrainingText()).string();
  const auto split = (dir.path() / "split").string(), whole = (dir.path() / "whole").string();
  const std::vector<std::string> shape = {"--data", data, "--batch", "2", "--seq", "8", "--val-every", "2",
                                          "--val-batches", "1", "--weight-decay", "0.1"};
  auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"train"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), shape.begin(), shape.end());
    return runOsprey(a);
  };
  // 2 steps on gpu/host, save; resume on lists for 2 more; against 4 uninterrupted on gpu/host.
  CliRun first = train({"--backend", "gpu", "--preset", "tiny", "--steps", "2", "--save", split});
  ASSERT_EQ(first.status, 0) << first.err;
  CliRun second = train({"--backend", "lists", "--resume", split, "--steps", "2", "--save", split});
  ASSERT_EQ(second.status, 0) << second.err;
  CliRun straight = train({"--backend", "gpu", "--preset", "tiny", "--steps", "4", "--save", whole});
  ASSERT_EQ(straight.status, 0) << straight.err;

  const fs::path a = gpt2::train::checkpointDir(split), b = gpt2::train::checkpointDir(whole);
  expectSameTensors(a / "model.safetensors", b / "model.safetensors");
  expectSameTensors(a / "optimizer.safetensors", b / "optimizer.safetensors");
  auto sa = gpt2::train::loadTrainingCheckpoint(a), sb = gpt2::train::loadTrainingCheckpoint(b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->state.step, 4);
  EXPECT_EQ(gpt2::train::trainerStateJson(sa->state), gpt2::train::trainerStateJson(sb->state));
  // The loss history: the same train and validation losses, row for row.
  EXPECT_EQ(column(fs::path(split) / "loss.csv", 1), column(fs::path(whole) / "loss.csv", 1));
  EXPECT_EQ(column(fs::path(split) / "loss.csv", 2), column(fs::path(whole) / "loss.csv", 2));
  EXPECT_EQ(column(fs::path(whole) / "loss.csv", 1).size(), 4u);

  // A resumed run refuses a different batch shape and changed data.
  CliRun badShape = runOsprey({"train", "--resume", split, "--data", data, "--steps", "1", "--batch", "3"});
  EXPECT_EQ(badShape.status, 1);
  EXPECT_NE(badShape.err.find("--batch 2 --seq 8"), std::string::npos) << badShape.err;
  const auto other = writeFile(dir.path(), "other.txt", sampleTrainingText() + "more").string();
  CliRun badData = runOsprey({"train", "--resume", split, "--data", other, "--steps", "1"});
  EXPECT_EQ(badData.status, 1);
  EXPECT_NE(badData.err.find("not the text the checkpoint was trained on"), std::string::npos) << badData.err;
}

TEST(TrainCli, InterruptFinishesTheStepSavesAndExitsCleanly) {
  gpt2::testing::TempDir dir;
  const auto data = writeFile(dir.path(), "text.txt", sampleTrainingText()).string();
  const fs::path save = dir.path() / "run";
  std::atomic<bool> done{false};
  std::thread interrupter([&] {
    // Once the first step is in the loss history, press Ctrl-C.
    while (!done.load()) {
      if (fs::exists(save / "loss.csv") && column(save / "loss.csv", 0).size() >= 1) {
        std::raise(SIGINT);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  CliRun r = runOsprey({"train", "--backend", "gpu", "--preset", "tiny", "--data", data, "--batch", "2", "--seq", "8",
                  "--steps", "100000", "--save", save.string()});
  done = true;
  interrupter.join();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("interrupted: stopped cleanly after step"), std::string::npos) << r.out;
  auto c = gpt2::train::loadTrainingCheckpoint(save);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_GE(c->state.step, 1);
  EXPECT_LT(c->state.step, 100000);
  EXPECT_EQ(static_cast<gpt2::Index>(column(save / "loss.csv", 0).size()), c->state.step);
}

TEST(TrainCli, BadDataIsAClearError) {
  gpt2::testing::TempDir dir;
  const auto empty = writeFile(dir.path(), "empty.txt", "").string();
  CliRun e = runOsprey({"train-step", "--preset", "tiny", "--data", empty, "--batch", "2", "--seq", "8"});
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.err.find("empty.txt: the training data is empty"), std::string::npos) << e.err;

  const auto shortText = writeFile(dir.path(), "short.txt", "To be, or not to be").string();
  CliRun s = runOsprey({"train", "--preset", "tiny", "--data", shortText, "--batch", "2", "--seq", "8", "--steps", "1"});
  EXPECT_EQ(s.status, 1);
  EXPECT_NE(s.err.find("fewer than one batch needs"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("short.txt"), std::string::npos) << s.err;

  CliRun missing = runOsprey({"train-step", "--preset", "tiny", "--data", (dir.path() / "nope.txt").string()});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("nope.txt"), std::string::npos) << missing.err;

  CliRun tooLong = runOsprey({"train-step", "--preset", "tiny", "--data", writeFile(dir.path(), "t.txt", sampleTrainingText()).string(),
                        "--batch", "1", "--seq", "129"});
  EXPECT_EQ(tooLong.status, 1);
  EXPECT_NE(tooLong.err.find("context"), std::string::npos) << tooLong.err;
}

TEST(TrainCli, NonUtf8BytesTrainAsByteLevelTokens) {
  gpt2::testing::TempDir dir;
  std::string bytes;
  for (int i = 0; i < 600; ++i) bytes.push_back(static_cast<char>((i * 73 + 128) % 256));  // invalid UTF-8, NULs
  const auto data = writeFile(dir.path(), "bytes.bin", bytes).string();
  CliRun r = runOsprey({"train-step", "--backend", "gpu", "--preset", "tiny", "--data", data, "--batch", "2", "--seq", "8"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\nloss "), std::string::npos) << r.out;
  // A validation split too short for a batch is skipped with a note, not an error.
  const auto few = writeFile(dir.path(), "few.txt", sampleTrainingText().substr(0, 400)).string();
  CliRun v = runOsprey({"train", "--backend", "gpu", "--preset", "tiny", "--data", few, "--batch", "2", "--seq", "8",
                  "--steps", "1", "--val-every", "1"});
  ASSERT_EQ(v.status, 0) << v.err;
  EXPECT_NE(v.out.find("validation skipped"), std::string::npos) << v.out;
}
