// Tokenising a training text through the cache, and the tokenizer's digest (see train_data.hpp).
#include "gpt2/train/data.hpp"

#include <fmt/format.h>

#include "gpt2/train/data_cache.hpp"
#include "gpt2/train/data_sha256.hpp"

namespace gpt2::train {

osprey::Result<std::string> tokenizerDigest(const std::filesystem::path& dir) {
  for (auto [vocab, merges] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
    if (std::filesystem::is_regular_file(dir / vocab) && std::filesystem::is_regular_file(dir / merges)) {
      const std::string a = OSPREY_TRY(data::sha256File((dir / vocab).string()));
      const std::string b = OSPREY_TRY(data::sha256File((dir / merges).string()));
      return data::sha256Hex(a + b);
    }
  }
  return osprey::Error{fmt::format("{}: no tokenizer files (vocab.json + merges.txt)", dir.string())};
}

osprey::Result<TrainingText> prepareTrainingText(const std::string& dataPath, const Tokenizer& tokenizer,
                                                 const std::filesystem::path& tokenizerDir) {
  const std::string digest = OSPREY_TRY(tokenizerDigest(tokenizerDir));
  auto encode = [&tokenizer](std::string_view text) -> osprey::Result<std::vector<data::TokenId>> {
    return tokenizer.encode(text);
  };
  auto tokenized = OSPREY_TRY(data::loadOrTokenize(dataPath, digest, encode));
  TrainingText out;
  out.tokens = static_cast<Index>(tokenized.tokens.size());
  out.sha256 = tokenized.dataSha256;
  out.split = data::splitTrainVal(tokenized.tokens);
  out.cacheNote = tokenized.fromCache     ? "tokens from the cache " + data::cachePathFor(dataPath)
                  : tokenized.cacheWritten ? "tokenised and cached in " + data::cachePathFor(dataPath)
                                           : "tokenised (cache not written: " + tokenized.cacheNote + ")";
  if (!tokenized.cacheDamage.empty())  // a damaged cache is rebuilt, and the run says so
    out.cacheNote += " (the cache there was damaged and not read: " + tokenized.cacheDamage + ")";
  return out;
}

}  // namespace gpt2::train
