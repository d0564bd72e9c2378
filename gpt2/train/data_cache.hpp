// The tokenised-data cache: a text file is tokenised once, and the token ids are kept in the
// user's cache directory (cacheDirectory: --cache-dir, else $XDG_CACHE_HOME/osprey, else
// ~/.cache/osprey) as `<SHA-256 of the text>.osprey-tokens`, reused while neither the text nor the
// tokenizer has changed. Nothing is written beside the user's data, so read-only data trains too.
// The file is named by the text's content (texts at different paths never share a name unless
// they are the same bytes) and checked against the full key below when read.
//
// Cache key: the text's size, modification time and SHA-256, and a digest of the tokenizer
// (its vocab.json + merges.txt). Size and mtime make a stale cache cheap to spot; the SHA-256
// catches an edit that keeps both; the tokenizer digest catches a different vocabulary.
//
// File layout (little-endian):
//   8 bytes   "OSPRTOK1"
//   8 bytes   n = length of the JSON header that follows
//   n bytes   {"data_size":…, "data_mtime_ns":…, "data_sha256":"…", "tokenizer":"…", "count":N}
//   4·N bytes the token ids, uint32 each
// The cache is written through io::writeFileAtomic, so a reader sees the old cache or the new
// one, whole. A cache that cannot be written (a read-only cache directory, none at all) is
// reported and skipped: training goes on with the tokens in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "osprey/result.hpp"

namespace gpt2::data {

using TokenId = std::int32_t;

// Text -> token ids (the GPT-2 tokenizer's encode, or a stand-in in tests).
using Encoder = std::function<osprey::Result<std::vector<TokenId>>(std::string_view)>;

// What the cache is keyed by.
struct CacheKey {
  std::uint64_t dataSize = 0;
  std::int64_t dataMtimeNs = 0;
  std::string dataSha256;
  std::string tokenizer;  // digest of the tokenizer's files

  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// Tokens of a text file and where they came from.
struct TokenizedText {
  std::vector<TokenId> tokens;
  std::string dataSha256;     // digest of the text the tokens came from
  bool fromCache = false;     // true when an existing cache was reused
  bool cacheWritten = false;  // true when a fresh cache was saved
  std::string cachePath;      // the cache file read or written (or that could not be written)
  std::string cacheNote;      // why the cache was not written, when it was not
  std::string cacheDamage;    // why an existing cache was not read, when its header was damaged
};

// Where caches live: `given` (--cache-dir) when there is one; else $XDG_CACHE_HOME/osprey when
// XDG_CACHE_HOME is an absolute path (the XDG rule: a relative one is ignored); else
// $HOME/.cache/osprey. An error when there is no HOME either (the run then caches nothing).
osprey::Result<std::filesystem::path> cacheDirectory(const std::optional<std::string>& given);

// `<cacheDir>/<dataSha256>.osprey-tokens`
std::string cachePathIn(const std::filesystem::path& cacheDir, const std::string& dataSha256);

// The key of dataPath as it is on disk now.
osprey::Result<CacheKey> currentKey(const std::string& dataPath, const std::string& tokenizerDigest);

// The tokens of dataPath: from its cache in cacheDir (cachePathIn; the directory is made when
// missing) when the key matches, else tokenised with `encode` and cached there. Errors name the
// file: missing, unreadable, empty; a cache that cannot be written is a note, not an error.
osprey::Result<TokenizedText> loadOrTokenize(const std::string& dataPath, const std::string& tokenizerDigest,
                                             const Encoder& encode, const std::filesystem::path& cacheDir);

// The cache file's tokens if it exists and matches `key`; an empty result otherwise (a stale or
// damaged cache is not an error: it is rebuilt). A header that is not valid JSON (a key given
// twice, a number out of range) also says why in `damage`, for the run to report.
std::optional<std::vector<TokenId>> readCache(const std::string& cachePath, const CacheKey& key,
                                              std::string* damage = nullptr);

// Saves tokens under key (atomically).
osprey::Result<void> writeCache(const std::string& cachePath, const CacheKey& key,
                                const std::vector<TokenId>& tokens);

}  // namespace gpt2::data
