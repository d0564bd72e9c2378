// The data a training run reads, made ready once on the host. Each file is either a text
// (tokenised through the cache, data_cache.hpp, keyed by the text and the tokenizer's files) or an
// llm.c token shard (osprey/io/llmc_shard.hpp, its tokens taken as they are, checked against the
// model's vocabulary): told apart by the shard's magic, not by the file's name. A path holding
// `*`, `?` or `[` that names no file is a pattern for several shards (llm.c's
// `fineweb_train_*.bin`): every match in name order, their tokens one after another, in memory.
//
// Training and validation: the first 90% and last 10% of --data's tokens; with --val-data, all
// of --data trains and all of --val-data validates (llm.c's train and val shards).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpt2/train/data_batches.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "osprey/result.hpp"

namespace gpt2::train {

using osprey::Index;

// Where a run's data comes from and how its tokens are checked.
struct DataSources {
  std::string data;                       // --data: text, llm.c shard, or a pattern of shards
  std::optional<std::string> valData;     // --val-data: validation from this file instead of the split
  std::optional<std::string> cacheDir;    // --cache-dir (else data::cacheDirectory's default)
  Index vocab = 0;                        // the model's V: a shard's tokens must be below it
};

// One file's tokens.
struct TokenFile {
  std::vector<data::TokenId> tokens;
  std::string sha256;  // of the file's bytes
  std::string note;    // how the tokens were had: "tokens from the cache …", "llm.c token shard …"
};

struct TrainingText {
  data::TokenSplit split;  // train (first 90%, or all of --data), val (last 10%, or all of --val-data)
  std::string sha256;      // of --data
  Index tokens = 0;        // in the whole of --data
  std::string cacheNote;   // how each file's tokens were had, one line each
};

// SHA-256 over the tokenizer's two files (vocab.json + merges.txt, or encoder.json + vocab.bpe).
osprey::Result<std::string> tokenizerDigest(const std::filesystem::path& tokenizerDir);

// The tokens of one file (text or shard); errors name the file (missing, empty, malformed).
osprey::Result<TokenFile> readTokenFile(const std::string& path, const DataSources& sources,
                                        const Tokenizer& tokenizer, const std::filesystem::path& tokenizerDir);

// --data (and --val-data) ready to train on.
osprey::Result<TrainingText> prepareTrainingText(const DataSources& sources, const Tokenizer& tokenizer,
                                                 const std::filesystem::path& tokenizerDir);

}  // namespace gpt2::train
