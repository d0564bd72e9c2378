// llm.c token shards as training data (issue 30, item 4): a shard holding a text's tokens trains
// exactly as the text does (the same step, to the byte); --val-data takes validation from a shard;
// a malformed shard, or one whose tokens the model cannot embed, stops the run naming the file.
// The runs train on gpu/host: what is tested is the reading (lists == gpu/host is tested elsewhere),
// and lists would take four times as long under the sanitizers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gpt2/temp_dir.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "osprey/io/llmc_shard.hpp"
#include "train/cli_run.hpp"

namespace {

namespace fs = std::filesystem;
using gpt2::testing::ScopedEnv;
using gpt2::testing::TempDir;
using osprey::testing::train::runOsprey;

using osprey::testing::train::afterHeaderLine;

std::string citizenText() {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  return text;
}

TEST(LlmcShardData, AShardOfATextsTokensTrainsAsTheTextDoes) {
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", (dir / "xdg").string());
  const fs::path text = dir / "input.txt", shard = dir / "input_train.bin";
  { std::ofstream(text, std::ios::binary) << citizenText(); }
  auto tokenizer = gpt2::Tokenizer::load(gpt2::testing::tokenizerDir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  auto ids = tokenizer->encode(citizenText());
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(osprey::io::writeLlmcShard(shard.string(), *ids).ok());

  const std::vector<std::string> step{"train-step", "--preset", "tiny", "--batch", "2", "--seq", "16", "--backend", "gpu"};
  auto onText = step, onShard = step;
  onText.insert(onText.end(), {"--data", text.string()});
  onShard.insert(onShard.end(), {"--data", shard.string()});
  auto a = runOsprey(onText);
  auto b = runOsprey(onShard);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.err.find(shard.string() + ": an llm.c token shard of " + std::to_string(ids->size()) + " tokens"),
            std::string::npos)
      << b.err;
  // The step's loss, gradient sums and loss after AdamW; the description line names the file.
  auto withoutFile = [](std::string s, const std::string& file) {
    for (std::size_t at; (at = s.find(file)) != std::string::npos;) s.erase(at, file.size());
    return s;
  };
  EXPECT_EQ(withoutFile(afterHeaderLine(a.out), text.string()), withoutFile(afterHeaderLine(b.out), shard.string()));
  // Only the text was cached: a shard's tokens are read as they are.
  ASSERT_TRUE(fs::is_directory(dir / "xdg" / "osprey"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "xdg" / "osprey"), fs::directory_iterator{}), 1);
}

TEST(LlmcShardData, ValidationFromAShard) {
  TempDir dir;
  std::vector<std::int32_t> train, val;
  for (int i = 0; i < 400; ++i) train.push_back((i * 7919) % 50257);
  for (int i = 0; i < 100; ++i) val.push_back((i * 104729) % 50257);
  ASSERT_TRUE(osprey::io::writeLlmcShard((dir / "train.bin").string(), train).ok());
  ASSERT_TRUE(osprey::io::writeLlmcShard((dir / "val.bin").string(), val).ok());
  auto r = runOsprey({"train", "--preset", "tiny", "--backend", "gpu", "--data", (dir / "train.bin").string(), "--val-data",
                      (dir / "val.bin").string(), "--steps", "2", "--batch", "2", "--seq", "16", "--val-every", "1",
                      "--val-batches", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  // All of --data trains and all of --val-data validates.
  EXPECT_NE(r.err.find("data: 400 tokens (400 train, 100 validation from " + (dir / "val.bin").string() + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("validation: " + (dir / "val.bin").string() + ": an llm.c token shard of 100 tokens"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("| val loss "), std::string::npos) << r.out;
}

// A pattern names several shards, as llm.c's -i does: their tokens in name order, so the step is
// the one trained on a single shard holding them all.
TEST(LlmcShardData, APatternReadsEveryShardInNameOrder) {
  TempDir dir;
  std::vector<std::int32_t> all;
  for (int i = 0; i < 600; ++i) all.push_back((i * 7919 + 11) % 50257);
  // Written out of order: the name decides the order, not the writing.
  const std::vector<std::pair<std::string, std::pair<int, int>>> parts{
      {"shard_000002.bin", {400, 600}}, {"shard_000000.bin", {0, 150}}, {"shard_000001.bin", {150, 400}}};
  for (const auto& [name, range] : parts)
    ASSERT_TRUE(osprey::io::writeLlmcShard((dir / name).string(),
                                           std::vector<std::int32_t>(all.begin() + range.first,
                                                                     all.begin() + range.second))
                    .ok());
  ASSERT_TRUE(osprey::io::writeLlmcShard((dir / "whole.bin").string(), all).ok());
  const std::string pattern = (dir / "shard_*.bin").string();
  const std::vector<std::string> step{"train-step", "--preset", "tiny", "--batch", "4", "--seq", "32", "--backend", "gpu"};
  auto onPattern = step, onWhole = step;
  onPattern.insert(onPattern.end(), {"--data", pattern});
  onWhole.insert(onWhole.end(), {"--data", (dir / "whole.bin").string()});
  auto a = runOsprey(onPattern);
  auto b = runOsprey(onWhole);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(a.err.find(pattern + ": 3 llm.c token shards"), std::string::npos) << a.err;
  auto lines = [](const std::string& s) { return s.substr(s.find('\n', s.find('\n') + 1) + 1); };  // after the description
  EXPECT_EQ(lines(a.out), lines(b.out));

  auto none = runOsprey({"train-step", "--preset", "tiny", "--data", (dir / "nothing_*.bin").string()});
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("nothing_*.bin: no file matches this pattern"), std::string::npos) << none.err;
  { std::ofstream(dir / "shard_notes.bin") << "a text, not a shard"; }
  auto mixed = runOsprey(onPattern);
  EXPECT_EQ(mixed.status, 1);
  EXPECT_NE(mixed.err.find("shard_notes.bin (matched by " + pattern + "): not an llm.c token shard"), std::string::npos)
      << mixed.err;
}

TEST(LlmcShardData, BadShardsStopTheRunNamingTheFile) {
  TempDir dir;
  std::vector<std::int32_t> tokens(100, 50256);
  tokens[42] = 60000;  // fits uint16, not GPT-2's vocabulary
  const fs::path beyond = dir / "beyond.bin";
  ASSERT_TRUE(osprey::io::writeLlmcShard(beyond.string(), tokens).ok());
  auto r = runOsprey({"train", "--preset", "tiny", "--data", beyond.string(), "--steps", "1", "--batch", "1",
                      "--seq", "8"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(beyond.string() + ": token 60000 at position 42 is outside the model's vocabulary of 50257"),
            std::string::npos)
      << r.err;

  tokens[42] = 1;
  const fs::path cut = dir / "cut.bin";
  ASSERT_TRUE(osprey::io::writeLlmcShard(cut.string(), tokens).ok());
  fs::resize_file(cut, fs::file_size(cut) - 10);
  r = runOsprey({"train", "--preset", "tiny", "--data", cut.string(), "--steps", "1", "--batch", "1", "--seq", "8"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(cut.string() + ": the header says 100 tokens but the file holds 95"), std::string::npos)
      << r.err;
  r = runOsprey({"train", "--preset", "tiny", "--data", (dir / "beyond.bin").string(), "--val-data", cut.string(),
                 "--steps", "1", "--batch", "1", "--seq", "8"});
  EXPECT_EQ(r.status, 1);  // the first bad file named is --data's
}

}  // namespace
