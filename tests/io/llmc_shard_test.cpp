// llm.c token shards: written and read back (the same tokens), the bytes on disk checked against
// llm.c's layout built by hand here, and every malformed shard (bad magic, wrong version, cut
// short, trailing or odd bytes, no tokens, a token beyond the vocabulary) refused with an error
// naming the file and the problem.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/io_test_files.hpp"
#include "osprey/io/llmc_shard.hpp"

namespace osprey::io {
namespace {

using testing::readBytes;
using testing::ScratchDir;
using testing::writeBytes;

void putInt(std::string& bytes, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>(v >> (8 * k)));
}

// A shard as llm.c's data_common.py write_datafile makes it: header {magic, version, count, 0...}.
std::string shardBytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                       const std::vector<std::uint16_t>& tokens) {
  std::string bytes;
  putInt(bytes, static_cast<std::uint32_t>(magic));
  putInt(bytes, static_cast<std::uint32_t>(version));
  putInt(bytes, static_cast<std::uint32_t>(count));
  bytes.resize(1024, '\0');
  for (std::uint16_t t : tokens) {
    bytes.push_back(static_cast<char>(t & 0xff));
    bytes.push_back(static_cast<char>(t >> 8));
  }
  return bytes;
}

std::string errorReading(const std::string& path, Index vocab = 50257) {
  auto r = readLlmcShard(path, vocab);
  return r.ok() ? std::string("(read)") : r.error().message;
}

TEST(LlmcShard, WrittenThenReadGivesTheSameTokens) {
  ScratchDir dir;
  const std::vector<std::int32_t> tokens{50256, 0, 1, 255, 256, 464, 3139, 50255, 65535, 12};
  const std::string path = dir.file("train.bin");
  ASSERT_TRUE(writeLlmcShard(path, tokens).ok());
  std::vector<std::uint16_t> asU16(tokens.begin(), tokens.end());
  EXPECT_EQ(readBytes(path), shardBytes(20240520, 1, 10, asU16));  // llm.c's bytes exactly
  EXPECT_TRUE(looksLikeLlmcShard(path));
  auto back = readLlmcShard(path, 65536);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, tokens);
}

TEST(LlmcShard, WritingRefusesWhatTheFormatCannotHold) {
  ScratchDir dir;
  EXPECT_FALSE(writeLlmcShard(dir.file("a.bin"), std::vector<std::int32_t>{1, 65536}).ok());
  EXPECT_FALSE(writeLlmcShard(dir.file("b.bin"), std::vector<std::int32_t>{-1}).ok());
  EXPECT_FALSE(writeLlmcShard(dir.file("c.bin"), std::vector<std::int32_t>{}).ok());
}

TEST(LlmcShard, MalformedShardsAreErrorsNamingTheFileAndProblem) {
  ScratchDir dir;
  const std::vector<std::uint16_t> three{1, 2, 3};
  const struct {
    const char* name;
    std::string bytes;
    const char* problem;
  } cases[] = {
      {"magic.bin", shardBytes(20240326, 1, 3, three), "not an llm.c token shard: magic 20240326"},
      {"version.bin", shardBytes(20240520, 2, 3, three), "version 2"},
      {"truncated.bin", shardBytes(20240520, 1, 4, three), "the header says 4 tokens but the file holds 3"},
      {"trailing.bin", shardBytes(20240520, 1, 2, three), "trailing bytes"},
      {"odd.bin", shardBytes(20240520, 1, 3, three) + "x", "odd count"},
      {"empty.bin", shardBytes(20240520, 1, 0, {}), "holds no tokens"},
      {"negative.bin", shardBytes(20240520, 1, -3, three), "token count is -3"},
      {"short-header.bin", shardBytes(20240520, 1, 3, {}).substr(0, 100), "shorter than the 1024-byte header"},
      {"vocab.bin", shardBytes(20240520, 1, 3, {1, 50257, 2}), "token 50257 at position 1 is outside"},
  };
  for (const auto& c : cases) {
    const std::string path = dir.file(c.name);
    writeBytes(path, c.bytes);
    const std::string message = errorReading(path);
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(c.problem), std::string::npos) << c.name << ": " << message;
  }
  EXPECT_NE(errorReading(dir.file("missing.bin")).find("missing.bin"), std::string::npos);
  EXPECT_FALSE(looksLikeLlmcShard(dir.file("missing.bin")));
  writeBytes(dir.file("text.txt"), "First Citizen:\n");
  EXPECT_FALSE(looksLikeLlmcShard(dir.file("text.txt")));
}

}  // namespace
}  // namespace osprey::io
