// Training checkpoints: the manifest round-trips, weights and moments come back bit for bit, and a
// save interrupted before its swap (or before any file's rename) leaves the previous checkpoint
// whole and loadable.
#include <gtest/gtest.h>

#include "gpt2/temp_dir.hpp"

#include <filesystem>
#include <string>
#include <unistd.h>

#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "osprey/io/atomic_file.hpp"
#include "train_helpers.hpp"

namespace fs = std::filesystem;
using namespace gpt2;
using namespace gpt2::train;
using namespace osprey::testing::train;

namespace {

HostCheckpoint checkpointAt(Index step) {
  HostCheckpoint c;
  c.weights = smallWeights(kSmall, static_cast<std::uint64_t>(step));
  c.m = smallWeights(kSmall, static_cast<std::uint64_t>(step) + 100);
  c.v = smallWeights(kSmall, static_cast<std::uint64_t>(step) + 200);
  for (auto& t : c.v.tensors)
    for (auto& x : t.values) x = x * x;
  c.state.step = step;
  c.state.dataPosition = 64 * step;
  c.state.dataEpoch = step / 3;
  c.state.batch = 2;
  c.state.seq = 8;
  c.state.microBatch = 1;
  c.state.adamw.lr = 3e-4;
  c.state.adamw.beta2 = 0.95;
  c.state.adamw.weightDecay = 0.1;
  c.state.dataPath = "some/text.txt";
  c.state.dataSha256 = "ab12";
  c.state.dataTokens = 12345;
  c.state.seed = 1337;
  c.state.label = "small";
  c.state.lastTrainLoss = 3.0000000000000004;
  return c;
}

void expectSame(const HostCheckpoint& a, const HostCheckpoint& b) {
  ASSERT_EQ(a.weights.tensors.size(), b.weights.tensors.size());
  for (std::size_t i = 0; i < a.weights.tensors.size(); ++i) {
    EXPECT_TRUE(sameBits(a.weights.tensors[i].values, b.weights.tensors[i].values)) << "weights " << i;
    EXPECT_TRUE(sameBits(a.m.tensors[i].values, b.m.tensors[i].values)) << "m " << i;
    EXPECT_TRUE(sameBits(a.v.tensors[i].values, b.v.tensors[i].values)) << "v " << i;
  }
  EXPECT_EQ(a.weights.config, b.weights.config);
  EXPECT_EQ(trainerStateJson(a.state), trainerStateJson(b.state));
}

fs::path tokenizerDir() {
  auto dir = findTokenizerDir();
  if (!dir.ok()) throw std::runtime_error(dir.error().message);
  return *dir;
}

}  // namespace

TEST(TrainCheckpoint, ManifestRoundTripsExactly) {
  const HostCheckpoint c = checkpointAt(5);
  auto back = parseTrainerState(trainerStateJson(c.state), "x");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(trainerStateJson(*back), trainerStateJson(c.state));
  EXPECT_EQ(back->adamw.lr, 3e-4);
  EXPECT_EQ(back->lastTrainLoss, 3.0000000000000004);
  EXPECT_FALSE(parseTrainerState("{}", "x").ok());
  EXPECT_FALSE(parseTrainerState("not json", "x").ok());
}

TEST(TrainCheckpoint, SaveThenLoadIsBitForBit) {
  gpt2::testing::TempDir dir;
  const HostCheckpoint c = checkpointAt(3);
  auto saved = saveTrainingCheckpoint(dir.path(), c, tokenizerDir());
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  for (const char* f : {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json",
                        "vocab.json", "merges.txt"})
    EXPECT_TRUE(fs::exists(checkpointDir(dir.path()) / f)) << f;
  auto fromSaveDir = loadTrainingCheckpoint(dir.path());
  ASSERT_TRUE(fromSaveDir.ok()) << fromSaveDir.error().message;
  expectSame(c, *fromSaveDir);
  auto fromCheckpointDir = loadTrainingCheckpoint(checkpointDir(dir.path()));
  ASSERT_TRUE(fromCheckpointDir.ok());
  expectSame(c, *fromCheckpointDir);
  // A second save replaces the first whole.
  const HostCheckpoint d = checkpointAt(4);
  ASSERT_TRUE(saveTrainingCheckpoint(dir.path(), d, tokenizerDir()).ok());
  expectSame(d, *loadTrainingCheckpoint(dir.path()));
}

TEST(TrainCheckpoint, SaveInterruptedBeforeSwapKeepsThePreviousCheckpoint) {
  gpt2::testing::TempDir dir;
  const HostCheckpoint before = checkpointAt(2);
  ASSERT_TRUE(saveTrainingCheckpoint(dir.path(), before, tokenizerDir()).ok());

  setFailBeforeCheckpointSwapForTesting(true);
  auto failed = saveTrainingCheckpoint(dir.path(), checkpointAt(9), tokenizerDir());
  setFailBeforeCheckpointSwapForTesting(false);
  ASSERT_FALSE(failed.ok());
  auto loaded = loadTrainingCheckpoint(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  expectSame(before, *loaded);

  // Interrupted earlier still: the first file's own atomic rename (io's failure hook).
  osprey::io::setFailBeforeRenameForTesting(true);
  auto failedEarly = saveTrainingCheckpoint(dir.path(), checkpointAt(10), tokenizerDir());
  osprey::io::setFailBeforeRenameForTesting(false);
  ASSERT_FALSE(failedEarly.ok());
  expectSame(before, *loadTrainingCheckpoint(dir.path()));

  // The next save succeeds and clears what the interrupted ones left.
  const HostCheckpoint after = checkpointAt(11);
  ASSERT_TRUE(saveTrainingCheckpoint(dir.path(), after, tokenizerDir()).ok());
  expectSame(after, *loadTrainingCheckpoint(dir.path()));
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find("checkpoint."), std::string::npos) << entry.path();
}

TEST(TrainCheckpoint, MissingOrDamagedCheckpointIsAClearError) {
  gpt2::testing::TempDir dir;
  auto none = loadTrainingCheckpoint(dir.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no training checkpoint"), std::string::npos) << none.error().message;
  ASSERT_TRUE(saveTrainingCheckpoint(dir.path(), checkpointAt(1), tokenizerDir()).ok());
  const fs::path optimizer = checkpointDir(dir.path()) / "optimizer.safetensors";
  fs::resize_file(optimizer, fs::file_size(optimizer) / 2);
  auto damaged = loadTrainingCheckpoint(dir.path());
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.error().message.find("optimizer.safetensors"), std::string::npos) << damaged.error().message;
}
