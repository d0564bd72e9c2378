// Where the token cache goes (issue 30, item 5): never beside the user's data, but in
// --cache-dir, else $XDG_CACHE_HOME/osprey, else ~/.cache/osprey, named by the text's SHA-256;
// a read-only data directory trains, and a cache directory that cannot be made costs only the cache.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "files.hpp"
#include "gpt2/temp_dir.hpp"
#include "gpt2/train/data_cache.hpp"
#include "gpt2/train/data_sha256.hpp"
#include "train/cli_run.hpp"

namespace fs = std::filesystem;
using gpt2::testing::ScopedEnv;
using gpt2::testing::TempDir;
using namespace gpt2::data;

namespace {

using osprey::testing::writeText;

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

osprey::Result<std::vector<TokenId>> bytesAsTokens(std::string_view text) {
  return std::vector<TokenId>(text.begin(), text.end());
}

// Makes dir read-only for the test's lifetime (root ignores the mode; the listing is checked too).
struct ReadOnly {
  fs::path dir;
  explicit ReadOnly(fs::path d) : dir(std::move(d)) { ::chmod(dir.c_str(), 0555); }
  ~ReadOnly() { ::chmod(dir.c_str(), 0755); }
};

}  // namespace

TEST(TokenCacheLocation, CacheDirIsGivenElseXdgElseHome) {
  EXPECT_EQ(*cacheDirectory(std::string("/some/where")), fs::path("/some/where"));
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg/cache");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(*cacheDirectory(std::nullopt), fs::path("/xdg/cache/osprey"));
    EXPECT_EQ(*cacheDirectory(std::string("/given")), fs::path("/given"));  // --cache-dir wins
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/cache");  // the XDG rule: a relative path is ignored
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(*cacheDirectory(std::nullopt), fs::path("/home/u/.cache/osprey"));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(*cacheDirectory(std::nullopt), fs::path("/home/u/.cache/osprey"));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv home("HOME", std::nullopt);
    auto none = cacheDirectory(std::nullopt);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("--cache-dir"), std::string::npos) << none.error().message;
  }
  EXPECT_FALSE(cacheDirectory(std::string("")).ok());
}

TEST(TokenCacheLocation, TheCacheIsNamedByTheTextsContentInTheCacheDirectory) {
  TempDir dir;
  fs::create_directories(dir / "data");
  const fs::path text = dir / "data" / "input.txt";
  writeText(text, "hello cache");
  const fs::path cacheDir = dir / "cache" / "osprey";  // made when missing
  auto first = loadOrTokenize(text.string(), "tok", bytesAsTokens, cacheDir);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first->cacheWritten) << first->cacheNote;
  EXPECT_EQ(first->cachePath, (cacheDir / (sha256Hex("hello cache") + ".osprey-tokens")).string());
  EXPECT_EQ(first->cachePath, cachePathIn(cacheDir, sha256Hex("hello cache")));
  EXPECT_TRUE(fs::is_regular_file(first->cachePath));
  EXPECT_EQ(listing(dir / "data"), std::set<std::string>{"input.txt"});  // nothing beside the data
  auto second = loadOrTokenize(text.string(), "tok", bytesAsTokens, cacheDir);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->fromCache);
  EXPECT_EQ(second->tokens, first->tokens);
  // Other bytes, another name: the first text's cache stays where it was.
  writeText(text, "other bytes");
  auto third = loadOrTokenize(text.string(), "tok", bytesAsTokens, cacheDir);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->fromCache);
  EXPECT_NE(third->cachePath, first->cachePath);
  EXPECT_TRUE(fs::exists(first->cachePath));
}

TEST(TokenCacheLocation, ReadOnlyDataTrainsAndACacheThatCannotBeMadeIsOnlyANote) {
  TempDir dir;
  fs::create_directories(dir / "data");
  const fs::path text = dir / "data" / "input.txt";
  writeText(text, "read-only text");
  {
    ReadOnly locked(dir / "data");
    auto r = loadOrTokenize(text.string(), "tok", bytesAsTokens, dir / "cache");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->cacheWritten) << r->cacheNote;
    EXPECT_EQ(listing(dir / "data"), std::set<std::string>{"input.txt"});
  }
  writeText(dir / "not-a-directory", "x");
  auto blocked = loadOrTokenize(text.string(), "tok", bytesAsTokens, dir / "not-a-directory" / "osprey");
  ASSERT_TRUE(blocked.ok()) << blocked.error().message;
  EXPECT_FALSE(blocked->cacheWritten);
  EXPECT_EQ(blocked->tokens.size(), 14u);
  EXPECT_NE(blocked->cacheNote.find("not-a-directory"), std::string::npos) << blocked->cacheNote;
}

// The command line: train says where the cache went, uses it the next time, and leaves the
// (read-only) data directory as it found it; --cache-dir puts it elsewhere.
TEST(TokenCacheLocation, TrainSaysWhereTheCacheWent) {
  TempDir dir;
  ScopedEnv xdg("XDG_CACHE_HOME", (dir / "xdg").string());
  fs::create_directories(dir / "data");
  const fs::path text = dir / "data" / "input.txt";
  std::string body;
  for (int i = 0; i < 40; ++i) body += "To be, or not to be, that is the question.\n";
  writeText(text, body);
  const std::string expected = cachePathIn(dir / "xdg" / "osprey", sha256Hex(body));
  ReadOnly locked(dir / "data");
  const std::vector<std::string> train{"train", "--preset", "tiny", "--data", text.string(), "--steps", "1",
                                       "--batch", "1", "--seq", "8"};
  auto first = osprey::testing::train::runOsprey(train);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.err.find("tokenised and cached in " + expected), std::string::npos) << first.err;
  EXPECT_TRUE(fs::is_regular_file(expected));
  auto again = osprey::testing::train::runOsprey(train);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("tokens from the cache " + expected), std::string::npos) << again.err;
  EXPECT_EQ(listing(dir / "data"), std::set<std::string>{"input.txt"});

  auto withDir = train;
  withDir.insert(withDir.end(), {"--cache-dir", (dir / "mine").string()});
  auto elsewhere = osprey::testing::train::runOsprey(withDir);
  ASSERT_EQ(elsewhere.status, 0) << elsewhere.err;
  EXPECT_NE(elsewhere.err.find("tokenised and cached in " + cachePathIn(dir / "mine", sha256Hex(body))),
            std::string::npos)
      << elsewhere.err;
}
