// Item: a step whose loss or whose update is not finite stops the run with an error naming the
// step and what was kept, and a good checkpoint is never replaced by a broken one: not by the
// loop, not by the final save, not by a save asked for directly, and a checkpoint holding NaN is
// refused when loaded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gpt2/temp_dir.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/finite.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "handlers.hpp"
#include "osprey/io/safetensors_writer.hpp"
#include "hostile_helpers.hpp"
#include "train_helpers.hpp"

namespace fs = std::filesystem;
using gpt2::testing::TempDir;
using namespace osprey::testing::train;

namespace {

std::vector<std::string> csvSteps(const fs::path& csv) {
  std::vector<std::string> steps;
  std::istringstream lines(readText(csv));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) steps.push_back(line.substr(0, line.find(',')));
  return steps;
}

}  // namespace

// --lr 1e308: lr / (1 - beta1) overflows, so the first update writes infinities (the step's own
// loss, computed before the update, is finite).
TEST(HostileTrainNonFinite, AnUpdateThatOverflowsStopsTheRunAndKeepsTheCheckpoint) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  ASSERT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "2", "--save", run.string()}).status, 0);
  const auto before = snapshot(gpt2::train::checkpointDir(run));

  CliRun bad = tinyTrain(data, {"--resume", run.string(), "--steps", "3", "--save", run.string(), "--save-every", "1",
                                "--lr", "1e308"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("step 3: the update left NaN or infinity in "), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("nothing saved after step 2"), std::string::npos) << bad.err;
  EXPECT_EQ(snapshot(gpt2::train::checkpointDir(run)), before) << "the good checkpoint was touched";
  EXPECT_EQ(csvSteps(run / "loss.csv"), (std::vector<std::string>{"1", "2"}));

  // A fresh run that breaks at its first step saves nothing, and leaves a directory another run
  // may use without --overwrite.
  const fs::path fresh = dir / "fresh";
  CliRun first = tinyTrain(data, {"--preset", "tiny", "--steps", "2", "--save", fresh.string(), "--lr", "1e308"});
  EXPECT_EQ(first.status, 1);
  EXPECT_NE(first.err.find("step 1: the update left NaN or infinity"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("nothing saved to " + fresh.string()), std::string::npos) << first.err;
  EXPECT_FALSE(fs::exists(gpt2::train::checkpointDir(fresh)));
  EXPECT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", fresh.string()}).status, 0);
}

// --lr 1e300: the update leaves finite weights of size 1e300, and the next forward pass overflows
// into a NaN loss at step 4. The run stops there: the final save never happens, and the
// checkpoint of step 2 is untouched.
TEST(HostileTrainNonFinite, ALossThatIsNotFiniteStopsTheRunBeforeAnySave) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  ASSERT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "2", "--save", run.string()}).status, 0);
  const auto before = snapshot(gpt2::train::checkpointDir(run));

  CliRun bad = tinyTrain(data, {"--resume", run.string(), "--steps", "5", "--save", run.string(), "--lr", "1e300"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("step 4: the loss is nan"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("nothing saved after step 2"), std::string::npos) << bad.err;
  EXPECT_EQ(snapshot(gpt2::train::checkpointDir(run)), before);
}

// The save refuses what the loop would never hand it (a caller other than the loop, or a moment
// that overflowed while the weights stayed finite): nothing on disk changes.
TEST(HostileTrainNonFinite, ASaveOfNonFiniteNumbersIsRefusedAndChangesNothing) {
  TempDir dir;
  auto tokenizer = gpt2::findTokenizerDir();
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  gpt2::train::HostCheckpoint c;
  c.weights = smallWeights();
  c.m = smallWeights(kSmall, 8);
  c.v = smallWeights(kSmall, 9);
  for (auto& t : c.v.tensors)
    for (auto& x : t.values) x = x * x;
  c.state.step = 4;
  c.state.batch = 2;
  c.state.seq = 8;
  c.state.label = "small";
  ASSERT_TRUE(gpt2::train::saveTrainingCheckpoint(dir.path(), c, *tokenizer).ok());
  const auto before = snapshot(dir.path());

  auto nanWeights = c;
  nanWeights.state.step = 5;
  nanWeights.weights.tensors[3].values[2] = std::nan("");
  auto refused = gpt2::train::saveTrainingCheckpoint(dir.path(), nanWeights, *tokenizer);
  ASSERT_FALSE(refused.ok());
  const auto spec3 = gpt2::parameterSpecs(kSmall)[3].name;
  EXPECT_NE(refused.error().message.find("refusing to save step 5"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find(spec3 + "[2] is nan"), std::string::npos) << refused.error().message;

  auto infMoment = c;
  infMoment.v.tensors[0].values[0] = std::numeric_limits<double>::infinity();
  auto refusedMoment = gpt2::train::saveTrainingCheckpoint(dir.path(), infMoment, *tokenizer);
  ASSERT_FALSE(refusedMoment.ok());
  EXPECT_NE(refusedMoment.error().message.find("v.wte.weight[0] is inf"), std::string::npos)
      << refusedMoment.error().message;
  EXPECT_EQ(snapshot(dir.path()), before);
}

// A checkpoint with an infinity in it (written by another program) cannot be resumed from.
TEST(HostileTrainNonFinite, ACheckpointHoldingInfinityIsRefusedWhenLoaded) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  ASSERT_EQ(saveOneStep(data, run).status, 0);
  auto c = gpt2::train::loadTrainingCheckpoint(run);
  ASSERT_TRUE(c.ok()) << c.error().message;
  c->weights.tensors[1].values[5] = -std::numeric_limits<double>::infinity();
  const auto specs = gpt2::parameterSpecs(c->weights.config);
  std::vector<osprey::io::TensorToSave> tensors;
  for (std::size_t i = 0; i < specs.size(); ++i)
    tensors.push_back({specs[i].name, specs[i].shape, std::span<const double>(c->weights.tensors[i].values)});
  const fs::path model = gpt2::train::checkpointDir(run) / "model.safetensors";
  ASSERT_TRUE(osprey::io::writeSafetensors(model.string(), tensors, osprey::io::DType::F64).ok());

  CliRun r = tinyTrain(data, {"--resume", run.string(), "--steps", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot resume: wpe.weight[5] is -inf"), std::string::npos) << r.err;
}

// The device-side check finds a single bad element wherever it lies (the first and last of each
// thread's stride, and either side of a run's length), on both host handlers.
TEST(HostileTrainNonFinite, TheHandlerSideCheckFindsOneBadElement) {
  auto check = [](auto& h) {
    const std::size_t run = static_cast<std::size_t>(gpt2::train::kFiniteRun);
    const std::size_t n = 3 * run + 17;
    for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
      for (std::size_t at : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{4}, run - 1, run,
                             2 * run + 7, n - 5, n - 2, n - 1}) {
        std::vector<double> values(n, 1e300);
        values[at] = bad;
        auto b = h.fromList(std::span<const double>(values));
        ASSERT_TRUE(b.ok());
        auto found = gpt2::train::holdsNonFinite(h, *b);
        ASSERT_TRUE(found.ok());
        EXPECT_TRUE(*found) << bad << " at " << at;
      }
    }
    std::vector<double> fine(n, -1.7976931348623157e308);
    auto b = h.fromList(std::span<const double>(fine));
    EXPECT_FALSE(*gpt2::train::holdsNonFinite(h, *b));
  };
  osprey::Lists lists;
  check(lists);
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  check(host);
}

// The per-step count of bad runs, level after level of 64-term row sums: every length around the
// levels' edges gives the exact number of ones.
TEST(HostileTrainNonFinite, TheDeviceCountIsExactAtEveryLevel) {
  auto check = [](auto& h) {
    for (std::size_t n : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{4096},
                          std::size_t{4097}, std::size_t{262145}}) {
      std::vector<double> flags(n, 0.0);
      for (std::size_t i = 0; i < n; i += 1 + i % 97) flags[i] = 1.0;
      flags[n - 1] = 1.0;
      const long long ones = std::count(flags.begin(), flags.end(), 1.0);
      auto b = h.fromList(std::span<const double>(flags));
      ASSERT_TRUE(b.ok());
      auto count = gpt2::train::countOnDevice(h, std::move(*b));
      ASSERT_TRUE(count.ok()) << count.error().message;
      ASSERT_EQ(h.length(*count), 1);
      EXPECT_EQ(static_cast<long long>(h.get(*count, 0)), ones) << n << " flags";
    }
  };
  osprey::Lists lists;
  check(lists);
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  check(host);
}
