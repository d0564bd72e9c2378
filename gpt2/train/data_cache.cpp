// The tokenised-data cache (see data_cache.hpp for the file layout and the key).
#include "gpt2/train/data_cache.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpt2/train/data_sha256.hpp"
#include "osprey/io/atomic_file.hpp"
#include "osprey/io/input_file.hpp"
#include "osprey/io/json_text.hpp"

namespace gpt2::data {
namespace {

constexpr char kMagic[8] = {'O', 'S', 'P', 'R', 'T', 'O', 'K', '1'};
// A header longer than this is not one we wrote.
constexpr std::uint64_t kMaxHeaderBytes = 1 << 16;

std::uint64_t readU64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void appendU64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

osprey::Result<std::filesystem::path> cacheDirectory(const std::optional<std::string>& given) {
  if (given) {
    if (given->empty()) return osprey::Error{"--cache-dir is empty: give the directory for token caches"};
    return std::filesystem::path(*given);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/')
    return std::filesystem::path(xdg) / "osprey";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return std::filesystem::path(home) / ".cache" / "osprey";
  return osprey::Error{"no cache directory: neither XDG_CACHE_HOME (an absolute path) nor HOME is set; give "
                       "--cache-dir DIR"};
}

std::string cachePathIn(const std::filesystem::path& cacheDir, const std::string& dataSha256) {
  return (cacheDir / (dataSha256 + ".osprey-tokens")).string();
}

// Size and modification time of dataPath (the cheap half of the key).
static osprey::Result<CacheKey> statKey(const std::string& dataPath, const std::string& tokenizerDigest) {
  struct stat st {};
  if (::stat(dataPath.c_str(), &st) != 0)
    return osprey::Error{fmt::format("{}: cannot read the training data: {}", dataPath, std::strerror(errno))};
  if (!S_ISREG(st.st_mode))
    return osprey::Error{fmt::format("{}: the training data is not a regular file", dataPath)};
  CacheKey key;
  key.dataSize = static_cast<std::uint64_t>(st.st_size);
  key.dataMtimeNs = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  key.tokenizer = tokenizerDigest;
  return key;
}

osprey::Result<CacheKey> currentKey(const std::string& dataPath, const std::string& tokenizerDigest) {
  CacheKey key = OSPREY_TRY(statKey(dataPath, tokenizerDigest));
  key.dataSha256 = OSPREY_TRY(sha256File(dataPath));
  return key;
}

std::optional<std::vector<TokenId>> readCache(const std::string& cachePath, const CacheKey& key, std::string* damage) {
  // Only a regular file can be a cache (a FIFO in its place would block the read; anything else
  // is left for the new cache, written beside it and renamed over it, to replace).
  struct stat st {};
  if (::stat(cachePath.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::ifstream in(cachePath, std::ios::binary);
  if (!in) return std::nullopt;
  unsigned char head[16];
  if (!in.read(reinterpret_cast<char*>(head), 16)) return std::nullopt;
  if (std::memcmp(head, kMagic, 8) != 0) return std::nullopt;
  const std::uint64_t headerBytes = readU64(head + 8);
  if (headerBytes > kMaxHeaderBytes) return std::nullopt;
  std::string headerText(headerBytes, '\0');
  if (!in.read(headerText.data(), static_cast<std::streamsize>(headerBytes))) return std::nullopt;
  // The checked reader, as for every JSON file: a header with a key given twice is damaged (which
  // count or digest is meant is unclear), rebuilt, and the caller told why.
  auto parsed = osprey::io::parseJson(headerText, cachePath);
  if (!parsed.ok()) {
    if (damage) *damage = parsed.error().message;
    return std::nullopt;
  }
  const nlohmann::json& header = *parsed;
  if (!header.is_object()) return std::nullopt;
  // Integers only: nlohmann keeps a number beyond 64 bits as a double, whose conversion to an
  // integer would be undefined behaviour (a damaged cache is rebuilt, never read).
  const auto isUnsigned = [&](const char* key) { return header.contains(key) && header[key].is_number_unsigned(); };
  const auto isInteger = [&](const char* key) { return header.contains(key) && header[key].is_number_integer(); };
  if (!isUnsigned("data_size") || !isInteger("data_mtime_ns") || !isUnsigned("count")) return std::nullopt;
  try {
    CacheKey stored;
    stored.dataSize = header.at("data_size").get<std::uint64_t>();
    stored.dataMtimeNs = header.at("data_mtime_ns").get<std::int64_t>();
    stored.dataSha256 = header.at("data_sha256").get<std::string>();
    stored.tokenizer = header.at("tokenizer").get<std::string>();
    if (!(stored == key)) return std::nullopt;
    const auto count = header.at("count").get<std::uint64_t>();
    // Never trust a count the file cannot hold (a truncated cache is rebuilt, not read past).
    if (count > key.dataSize * 4 + 16) return std::nullopt;
    std::vector<unsigned char> raw(count * 4);
    if (count > 0 && !in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size())))
      return std::nullopt;
    if (in.peek() != std::char_traits<char>::eof()) return std::nullopt;  // trailing bytes: damaged
    std::vector<TokenId> tokens(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      const unsigned char* p = raw.data() + 4 * i;
      const std::uint32_t v = std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) |
                              (std::uint32_t(p[2]) << 16) | (std::uint32_t(p[3]) << 24);
      if (v > 0x7fffffffu) return std::nullopt;
      tokens[i] = static_cast<TokenId>(v);
    }
    return tokens;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

osprey::Result<void> writeCache(const std::string& cachePath, const CacheKey& key,
                                const std::vector<TokenId>& tokens) {
  nlohmann::json header = {{"data_size", key.dataSize},     {"data_mtime_ns", key.dataMtimeNs},
                           {"data_sha256", key.dataSha256}, {"tokenizer", key.tokenizer},
                           {"count", tokens.size()}};
  const std::string headerText = header.dump();
  std::string bytes(kMagic, 8);
  appendU64(bytes, headerText.size());
  bytes += headerText;
  bytes.reserve(bytes.size() + 4 * tokens.size());
  for (TokenId t : tokens) {
    const auto v = static_cast<std::uint32_t>(t);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  return osprey::io::writeFileAtomic(cachePath, bytes);
}

// The cache at cacheDir / name(key), cacheDir made first when a fresh cache is to be written.
osprey::Result<TokenizedText> loadOrTokenize(const std::string& dataPath, const std::string& tokenizerDigest,
                                             const Encoder& encode, const std::filesystem::path& cacheDir) {
  CacheKey key = OSPREY_TRY(statKey(dataPath, tokenizerDigest));
  if (key.dataSize == 0)
    return osprey::Error{fmt::format("{}: the training data is empty (0 bytes)", dataPath)};
  // One read serves both the digest and (on a cache miss) the tokenizer.
  const std::string text = OSPREY_TRY(osprey::io::readWholeFile(dataPath));
  key.dataSha256 = sha256Hex(text);
  const std::string cachePath = cachePathIn(cacheDir, key.dataSha256);
  TokenizedText out;
  out.dataSha256 = key.dataSha256;
  out.cachePath = cachePath;
  if (auto cached = readCache(cachePath, key, &out.cacheDamage)) {
    out.tokens = std::move(*cached);
    out.fromCache = true;
    return out;
  }
  auto tokens = encode(text);
  if (!tokens.ok())
    return osprey::Error{fmt::format("{}: cannot tokenise: {}", dataPath, tokens.error().message)};
  out.tokens = std::move(*tokens);
  std::error_code made;
  std::filesystem::create_directories(cacheDir, made);
  if (made) {
    out.cacheNote = fmt::format("cannot make the cache directory {}: {}", cacheDir.string(), made.message());
    return out;
  }
  auto written = writeCache(cachePath, key, out.tokens);
  out.cacheWritten = written.ok();
  if (!written.ok()) out.cacheNote = written.error().message;
  return out;
}

}  // namespace gpt2::data
