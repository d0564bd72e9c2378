// llm.c token shards, read and written (see llmc_shard.hpp for the layout).
#include "osprey/io/llmc_shard.hpp"

#include <array>

#include <fmt/format.h>

#include "osprey/io/atomic_file.hpp"
#include "osprey/io/input_file.hpp"

namespace osprey::io {
namespace {

std::int32_t intAt(const unsigned char* p) {
  return static_cast<std::int32_t>(std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) |
                                   (std::uint32_t(p[3]) << 24));
}

void appendInt(std::string& bytes, std::int32_t value) {
  const auto bits = static_cast<std::uint32_t>(value);
  for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>(bits >> (8 * k)));
}

}  // namespace

bool looksLikeLlmcShard(const std::string& path) {
  // InputFile, not a stream: a FIFO in the file's place is refused at once, never waited on.
  auto file = InputFile::open(path);
  std::array<unsigned char, 4> head{};
  if (!file.ok() || file->size() < head.size() || !file->readAt(0, head.size(), head.data()).ok()) return false;
  return intAt(head.data()) == kLlmcShardMagic;
}

Result<std::vector<std::int32_t>> readLlmcShard(const std::string& path, Index vocab) {
  const InputFile file = OSPREY_TRY(InputFile::open(path));
  if (file.size() < kLlmcShardHeaderBytes)
    return fileError(path, fmt::format("not an llm.c token shard: {} bytes, shorter than the {}-byte header",
                                       file.size(), kLlmcShardHeaderBytes));
  std::array<unsigned char, 12> head{};
  OSPREY_CHECK(file.readAt(0, head.size(), head.data()));
  const std::int32_t magic = intAt(head.data()), version = intAt(head.data() + 4), count = intAt(head.data() + 8);
  if (magic != kLlmcShardMagic)
    return fileError(path, fmt::format("not an llm.c token shard: magic {} (llm.c's shards begin with {})", magic,
                                       kLlmcShardMagic));
  if (version != kLlmcShardVersion)
    return fileError(path, fmt::format("llm.c token shard version {}; only version {} (uint16 tokens) is read",
                                       version, kLlmcShardVersion));
  const std::uint64_t body = file.size() - kLlmcShardHeaderBytes;
  if (body % 2 != 0)
    return fileError(path, fmt::format("{} bytes after the header: an odd count, but every token is 2 bytes", body));
  if (count <= 0) return fileError(path, fmt::format("the header's token count is {}: the shard holds no tokens", count));
  const auto expected = static_cast<std::uint64_t>(count);
  if (body / 2 != expected)
    return fileError(path, fmt::format("the header says {} tokens but the file holds {} ({} bytes after the "
                                       "header): {}",
                                       expected, body / 2, body, body / 2 < expected ? "truncated" : "trailing bytes"));
  std::vector<unsigned char> raw(body);
  OSPREY_CHECK(file.readAt(kLlmcShardHeaderBytes, body, raw.data()));
  std::vector<std::int32_t> tokens(expected);
  for (std::uint64_t i = 0; i < expected; ++i) {
    const std::int32_t t = std::int32_t(raw[2 * i]) | (std::int32_t(raw[2 * i + 1]) << 8);
    if (t >= vocab)
      return fileError(path, fmt::format("token {} at position {} is outside the model's vocabulary of {} ids", t, i,
                                         vocab));
    tokens[i] = t;
  }
  return tokens;
}

Result<void> writeLlmcShard(const std::string& path, std::span<const std::int32_t> tokens) {
  if (tokens.empty()) return fileError(path, "cannot write an llm.c token shard of no tokens");
  if (tokens.size() > 0x7fffffffu)
    return fileError(path, fmt::format("cannot write {} tokens: llm.c's header counts them in an int32", tokens.size()));
  std::string bytes;
  bytes.reserve(kLlmcShardHeaderBytes + 2 * tokens.size());
  appendInt(bytes, kLlmcShardMagic);
  appendInt(bytes, kLlmcShardVersion);
  appendInt(bytes, static_cast<std::int32_t>(tokens.size()));
  bytes.resize(kLlmcShardHeaderBytes, '\0');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int32_t t = tokens[i];
    if (t < 0 || t > 0xffff)
      return fileError(path, fmt::format("cannot write token {} at position {}: llm.c's shards hold uint16 tokens", t, i));
    bytes.push_back(static_cast<char>(t & 0xff));
    bytes.push_back(static_cast<char>(t >> 8));
  }
  return writeFileAtomic(path, bytes);
}

}  // namespace osprey::io
