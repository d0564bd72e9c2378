// The tokenised-data cache and batch streaming: keys, reuse, rebuild on change, atomic writes,
// the 90/10 split, sequential batches with wrap-around, and clear errors for data too short.
#include <gtest/gtest.h>

#include "files.hpp"
#include "gpt2/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpt2/train/data_batches.hpp"
#include "gpt2/train/data_cache.hpp"
#include "gpt2/train/data_sha256.hpp"

namespace fs = std::filesystem;
using namespace gpt2::data;

namespace {

using osprey::testing::writeText;

// A stand-in encoder: one token per byte, counting its calls.
struct ByteEncoder {
  int* calls;
  osprey::Result<std::vector<TokenId>> operator()(std::string_view text) const {
    ++*calls;
    std::vector<TokenId> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
};

}  // namespace

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(TokenCache, TokenisesOnceThenReuses) {
  gpt2::testing::TempDir dir;
  const fs::path data = dir.path() / "input.txt";
  const fs::path caches = dir.path() / "cache";
  writeText(data, "hello world");
  int calls = 0;
  auto first = loadOrTokenize(data.string(), "tok-A", ByteEncoder{&calls}, caches);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->fromCache);
  EXPECT_TRUE(first->cacheWritten) << first->cacheNote;
  EXPECT_EQ(first->tokens.size(), 11u);
  EXPECT_EQ(first->cachePath, cachePathIn(caches, sha256Hex("hello world")));
  EXPECT_TRUE(fs::exists(first->cachePath));

  auto second = loadOrTokenize(data.string(), "tok-A", ByteEncoder{&calls}, caches);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_TRUE(second->fromCache);
  EXPECT_EQ(second->tokens, first->tokens);
  EXPECT_EQ(calls, 1);
}

TEST(TokenCache, RebuiltWhenTextOrTokenizerChanges) {
  gpt2::testing::TempDir dir;
  const fs::path data = dir.path() / "input.txt";
  const fs::path caches = dir.path() / "cache";
  writeText(data, "abc");
  int calls = 0;
  ASSERT_TRUE(loadOrTokenize(data.string(), "tok-A", ByteEncoder{&calls}, caches).ok());
  // Same size, same mtime, different bytes: only the SHA-256 can tell.
  const auto mtime = fs::last_write_time(data);
  writeText(data, "abd");
  fs::last_write_time(data, mtime);
  auto changed = loadOrTokenize(data.string(), "tok-A", ByteEncoder{&calls}, caches);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(changed->fromCache);
  EXPECT_EQ(changed->tokens.back(), 'd');
  // A different tokenizer digest.
  auto other = loadOrTokenize(data.string(), "tok-B", ByteEncoder{&calls}, caches);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->fromCache);
  EXPECT_EQ(calls, 3);
}

TEST(TokenCache, DamagedCacheIsRebuiltNotTrusted) {
  gpt2::testing::TempDir dir;
  const fs::path data = dir.path() / "input.txt";
  const fs::path caches = dir.path() / "cache";
  writeText(data, "some text to cache");
  int calls = 0;
  ASSERT_TRUE(loadOrTokenize(data.string(), "t", ByteEncoder{&calls}, caches).ok());
  const auto cache = cachePathIn(caches, sha256Hex("some text to cache"));
  fs::resize_file(cache, fs::file_size(cache) - 3);  // truncated
  auto again = loadOrTokenize(data.string(), "t", ByteEncoder{&calls}, caches);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->fromCache);
  EXPECT_EQ(again->tokens.size(), 18u);
  writeText(cache, "garbage");
  auto third = loadOrTokenize(data.string(), "t", ByteEncoder{&calls}, caches);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->fromCache);
}

TEST(TokenCache, EmptyAndMissingFilesAreClearErrors) {
  gpt2::testing::TempDir dir;
  const fs::path empty = dir.path() / "empty.txt";
  const fs::path caches = dir.path() / "cache";
  writeText(empty, "");
  int calls = 0;
  auto r = loadOrTokenize(empty.string(), "t", ByteEncoder{&calls}, caches);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("empty.txt"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("empty"), std::string::npos);
  auto missing = loadOrTokenize((dir.path() / "nope.txt").string(), "t", ByteEncoder{&calls}, caches);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope.txt"), std::string::npos) << missing.error().message;
  auto directory = loadOrTokenize(dir.path().string(), "t", ByteEncoder{&calls}, caches);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(calls, 0);
}

TEST(TrainValSplit, NinetyTen) {
  std::vector<TokenId> tokens(1003);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(i);
  auto split = splitTrainVal(tokens);
  EXPECT_EQ(split.train.size(), 902u);  // floor(0.9 * 1003)
  EXPECT_EQ(split.val.size(), 101u);
  EXPECT_EQ(split.val.front(), 902);
}

TEST(BatchStream, SequentialWithWrapAround) {
  std::vector<TokenId> tokens(23);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(i);
  auto stream = BatchStream::create(tokens, 2, 4, "train", "t.txt");  // 9 tokens per batch
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  Batch a = stream->next();
  EXPECT_EQ(a.inputs, (std::vector<TokenId>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(a.targets, (std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7, 8}));
  Batch b = stream->next();
  EXPECT_EQ(b.inputs.front(), 8);
  EXPECT_EQ(b.targets.back(), 16);
  EXPECT_EQ(stream->position(), 16);
  Batch c = stream->next();  // 16 + 9 > 23: wraps to the start
  EXPECT_EQ(c.inputs, a.inputs);
  EXPECT_EQ(stream->epoch(), 1);
  // A stream moved to a saved position yields the same next batch.
  auto other = BatchStream::create(tokens, 2, 4, "train", "t.txt");
  ASSERT_TRUE(other->seek(stream->position(), stream->epoch()).ok());
  EXPECT_EQ(other->next().inputs, stream->next().inputs);
  EXPECT_FALSE(other->seek(24, 0).ok());
}

TEST(BatchStream, TooShortIsAClearError) {
  std::vector<TokenId> tokens(8);
  auto stream = BatchStream::create(tokens, 2, 4, "train", "short.txt");
  ASSERT_FALSE(stream.ok());
  const std::string& m = stream.error().message;
  EXPECT_NE(m.find("short.txt"), std::string::npos) << m;
  EXPECT_NE(m.find("8 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("9"), std::string::npos) << m;
  EXPECT_FALSE(BatchStream::create(tokens, 0, 4, "train", "x").ok());
}

TEST(BatchStream, MicroBatchRows) {
  std::vector<TokenId> tokens(40);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(i);
  auto stream = BatchStream::create(tokens, 4, 3, "train", "t");
  Batch whole = stream->next();
  Batch rows = batchRows(whole, 1, 2);
  EXPECT_EQ(rows.B, 2);
  EXPECT_EQ(rows.inputs, (std::vector<TokenId>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(rows.targets, (std::vector<TokenId>{4, 5, 6, 7, 8, 9}));
}
