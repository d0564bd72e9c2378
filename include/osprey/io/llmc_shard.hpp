// llm.c token shards: the `.bin` files llm.c's dev/data scripts write (data_common.py
// write_datafile) and its dataloader reads (llmc/dataloader.h), read as training and validation
// data and written for llm.c.
//
// File: a header of 256 little-endian int32 {magic 20240520, version 1, token count N, zeros...},
// then N tokens as little-endian uint16. Everything is checked before a token is trusted: the
// magic, the version, the count against the file's length (truncated, trailing or odd bytes), and
// each token against the model's vocabulary; every error names the file and the problem.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace osprey::io {

inline constexpr std::int32_t kLlmcShardMagic = 20240520;
inline constexpr std::int32_t kLlmcShardVersion = 1;
inline constexpr std::uint64_t kLlmcShardHeaderBytes = 256 * 4;

// Whether the file begins with the shard magic: how a run tells a shard from a text file (a
// text whose first four bytes are "\x88\xd8\x34\x01" is not one anybody writes). False for a file
// that cannot be read (or is not a regular file: a FIFO is never waited on); reading it then says why.
bool looksLikeLlmcShard(const std::string& path);

// The tokens of a shard, each checked to be below `vocab`.
Result<std::vector<std::int32_t>> readLlmcShard(const std::string& path, Index vocab);

// Writes a shard (atomically): every token must fit uint16, and the count int32.
Result<void> writeLlmcShard(const std::string& path, std::span<const std::int32_t> tokens);

}  // namespace osprey::io
