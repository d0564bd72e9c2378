// The text a training run reads, made ready once on the host: tokenised through the cache
// (data_cache.hpp, keyed by the text and the tokenizer's files) and split 90/10.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gpt2/train/data_batches.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "osprey/result.hpp"

namespace gpt2::train {

using osprey::Index;

struct TrainingText {
  data::TokenSplit split;  // train (first 90%), val (last 10%)
  std::string sha256;      // of the text
  Index tokens = 0;        // in the whole text
  std::string cacheNote;   // "tokens from the cache" / "tokenised and cached" / why not cached
};

// SHA-256 over the tokenizer's two files (vocab.json + merges.txt, or encoder.json + vocab.bpe).
osprey::Result<std::string> tokenizerDigest(const std::filesystem::path& tokenizerDir);

// The tokens of dataPath, from its cache when valid; errors name the file (missing, empty).
osprey::Result<TrainingText> prepareTrainingText(const std::string& dataPath, const Tokenizer& tokenizer,
                                                 const std::filesystem::path& tokenizerDir);

}  // namespace gpt2::train
