// libFuzzer target: arbitrary bytes as the tokenised-data cache of a training text
// (`<cache dir>/<SHA-256 of the text>.osprey-tokens`, gpt2/train/data_cache.cpp), read by
// data::readCache and data::loadOrTokenize, then split and batched as training reads it
// (data_batches.cpp). The cache directory is the target's own (as --cache-dir names one).
//
// An input that starts with the cache's magic "OSPRTOK1" is the whole cache file. Any other input
// is the cache's JSON header, then optionally a NUL byte and the raw token bytes: the target adds
// the magic and the header's length itself, so mutating the header keeps a well-framed file and
// the fuzzer reaches the header's fields (both kinds are in the seeds).
//
// The training text is fixed (kText below, with a fixed modification time), so a cache header can
// match its key and the fuzzer reaches the token section: fuzz/make-seeds.py writes seeds for
// exactly this key (keep the two in step). The reader must never crash, hang or read past the
// file; a damaged or stale cache is simply not used. A cache it accepts must hold no negative id
// and no more ids than the text could give, must be what loadOrTokenize then trains on (without
// tokenising again), must not match any other key, and its split and batches must be the
// tokens themselves, in order.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "gpt2/train/data_batches.hpp"
#include "gpt2/train/data_cache.hpp"
#include "gpt2/train/data_sha256.hpp"

using namespace gpt2::data;
using osprey_fuzz::require;

namespace {

// fuzz/make-seeds.py holds the same three constants.
constexpr std::string_view kText = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
constexpr const char* kTokenizerDigest = "fuzz-tokenizer";
constexpr std::int64_t kMtimeSeconds = 1700000000;
constexpr std::int64_t kMtimeNanoseconds = 123456789;

struct Setup {
  std::string dataPath;
  std::filesystem::path cacheDir;
  std::string cachePath;
  CacheKey key;

  Setup() {
    dataPath = (osprey_fuzz::scratchDir() / "train.txt").string();
    cacheDir = osprey_fuzz::scratchDir() / "cache";
    std::filesystem::create_directories(cacheDir);
    osprey_fuzz::writeBytes(dataPath, kText);
    const struct timespec times[2] = {{kMtimeSeconds, kMtimeNanoseconds}, {kMtimeSeconds, kMtimeNanoseconds}};
    if (::utimensat(AT_FDCWD, dataPath.c_str(), times, 0) != 0) osprey_fuzz::scratchFailure("cannot set mtime");
    auto current = currentKey(dataPath, kTokenizerDigest);
    if (!current.ok()) osprey_fuzz::scratchFailure(current.error().message);
    key = *current;
    require(key.dataSize == kText.size() && key.dataSha256 == sha256Hex(kText), "the fixed text's key");
    require(key.dataMtimeNs == kMtimeSeconds * 1000000000 + kMtimeNanoseconds, "the fixed modification time");
    cachePath = cachePathIn(cacheDir, key.dataSha256);  // where loadOrTokenize looks for it
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Setup setup;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (osprey_fuzz::startsWith(input, "OSPRTOK1")) {
    osprey_fuzz::writeBytes(setup.cachePath, input);
  } else {
    const std::size_t nul = input.find('\0');
    const std::string_view header = input.substr(0, nul);
    std::string file = "OSPRTOK1";
    for (int k = 0; k < 8; ++k) file.push_back(static_cast<char>((std::uint64_t{header.size()} >> (8 * k)) & 0xff));
    file += header;
    if (nul != std::string_view::npos) file += input.substr(nul + 1);
    osprey_fuzz::writeBytes(setup.cachePath, file);
  }

  const auto tokens = readCache(setup.cachePath, setup.key);
  if (!tokens) return 0;  // not a cache for this text: training would tokenise afresh
  require(tokens->size() <= setup.key.dataSize * 4 + 16, "no more ids than the text could give");
  for (TokenId id : *tokens) require(id >= 0, "no negative id");

  for (auto other : {CacheKey{setup.key.dataSize + 1, setup.key.dataMtimeNs, setup.key.dataSha256, setup.key.tokenizer},
                     CacheKey{setup.key.dataSize, setup.key.dataMtimeNs + 1, setup.key.dataSha256, setup.key.tokenizer},
                     CacheKey{setup.key.dataSize, setup.key.dataMtimeNs, sha256Hex("other"), setup.key.tokenizer},
                     CacheKey{setup.key.dataSize, setup.key.dataMtimeNs, setup.key.dataSha256, "other"}})
    require(!readCache(setup.cachePath, other).has_value(), "a cache matches its own key only");

  // A matching cache is what training reads: loadOrTokenize takes it without tokenising.
  const Encoder mustNotRun = [](std::string_view) -> osprey::Result<std::vector<TokenId>> {
    osprey_fuzz::require(false, "loadOrTokenize tokenises despite a valid cache");
    return std::vector<TokenId>{};
  };
  auto loaded = loadOrTokenize(setup.dataPath, kTokenizerDigest, mustNotRun, setup.cacheDir);
  require(loaded.ok() && loaded->fromCache && !loaded->cacheWritten, "a valid cache is used as it is");
  require(loaded->cachePath == setup.cachePath, "the cache read is the one in the cache directory");
  require(loaded->tokens == *tokens && loaded->dataSha256 == setup.key.dataSha256, "the cache's tokens");

  const TokenSplit split = splitTrainVal(loaded->tokens);
  require(split.train.size() + split.val.size() == tokens->size(), "the split keeps every token");
  require(split.train.size() * 10 <= tokens->size() * 9 + 9, "train is about 90%");
  for (std::size_t k = 0; k < tokens->size(); ++k) {
    const TokenId t = k < split.train.size() ? split.train[k] : split.val[k - split.train.size()];
    require(t == (*tokens)[k], "the split keeps the order");
  }
  for (const auto& [B, T] : {std::pair<osprey::Index, osprey::Index>{1, 1}, {2, 3}, {1, 16}}) {
    auto stream = BatchStream::create(split.train, B, T, "train", setup.dataPath);
    const bool fits = static_cast<osprey::Index>(split.train.size()) >= B * T + 1;
    require(stream.ok() == fits, "a stream exists exactly when one batch fits");
    if (!stream.ok()) continue;
    for (int step = 0; step < 3; ++step) {
      const osprey::Index at = stream->position() + B * T + 1 <= static_cast<osprey::Index>(split.train.size())
                                   ? stream->position()
                                   : 0;
      const Batch batch = stream->next();
      require(batch.inputs.size() == static_cast<std::size_t>(B * T) && batch.targets.size() == batch.inputs.size(),
              "a batch is B x T");
      for (std::size_t k = 0; k < batch.inputs.size(); ++k)
        require(batch.inputs[k] == split.train[at + k] && batch.targets[k] == split.train[at + k + 1],
                "a batch is consecutive tokens, targets shifted by one");
    }
  }
  return 0;
}
