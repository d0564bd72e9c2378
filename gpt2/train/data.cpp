// A run's data: text through the token cache, or llm.c shards as they are (see data.hpp).
#include "gpt2/train/data.hpp"

#include <glob.h>

#include <fmt/format.h>

#include "gpt2/train/data_cache.hpp"
#include "gpt2/train/data_sha256.hpp"
#include "osprey/io/input_file.hpp"
#include "osprey/io/llmc_shard.hpp"

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

namespace {

osprey::Result<TokenFile> readShard(const std::string& path, Index vocab) {
  TokenFile out;
  out.tokens = OSPREY_TRY(osprey::io::readLlmcShard(path, vocab));
  out.sha256 = OSPREY_TRY(data::sha256File(path));
  out.note = fmt::format("{}: an llm.c token shard of {} tokens", path, out.tokens.size());
  return out;
}

// Several shards named by a pattern, as llm.c's -i takes them (`fineweb_train_*.bin`): every
// match in name order (glob(3) sorts), each a shard, their tokens one after another. The digest
// is over the shards' digests in that order, so a resumed run notices a shard added or changed.
osprey::Result<TokenFile> readShards(const std::string& pattern, Index vocab) {
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &found);
  std::vector<std::string> paths(found.gl_pathv, found.gl_pathv + (rc == 0 ? found.gl_pathc : 0));
  ::globfree(&found);
  if (paths.empty()) return osprey::Error{fmt::format("{}: no file matches this pattern", pattern)};
  TokenFile out;
  std::string digests;
  for (const std::string& path : paths) {
    if (!osprey::io::looksLikeLlmcShard(path))
      return osprey::Error{fmt::format("{} (matched by {}): not an llm.c token shard; a pattern takes shards only",
                                       path, pattern)};
    TokenFile one = OSPREY_TRY(readShard(path, vocab));
    out.tokens.insert(out.tokens.end(), one.tokens.begin(), one.tokens.end());
    digests += one.sha256;
  }
  out.sha256 = data::sha256Hex(digests);
  out.note = fmt::format("{}: {} llm.c token shards ({} ... {}), {} tokens", pattern, paths.size(), paths.front(),
                         paths.back(), out.tokens.size());
  return out;
}

osprey::Result<TokenFile> readText(const std::string& path, const std::optional<std::string>& cacheDir,
                                   const Tokenizer& tokenizer, const std::filesystem::path& tokenizerDir) {
  const std::string digest = OSPREY_TRY(tokenizerDigest(tokenizerDir));
  auto encode = [&tokenizer](std::string_view text) -> osprey::Result<std::vector<data::TokenId>> {
    return tokenizer.encode(text);
  };
  // No cache directory (no HOME, no --cache-dir) is no reason to stop: the text is tokenised
  // and the run says why nothing was cached.
  auto dir = data::cacheDirectory(cacheDir);
  if (!dir.ok() && cacheDir) return dir.error();  // --cache-dir given but unusable
  TokenFile out;
  if (!dir.ok()) {
    const std::string text = OSPREY_TRY(osprey::io::readWholeFile(path));
    if (text.empty()) return osprey::Error{fmt::format("{}: the training data is empty (0 bytes)", path)};
    auto tokens = encode(text);
    if (!tokens.ok()) return osprey::Error{fmt::format("{}: cannot tokenise: {}", path, tokens.error().message)};
    out.tokens = std::move(*tokens);
    out.sha256 = data::sha256Hex(text);
    out.note = fmt::format("tokenised (cache not written: {})", dir.error().message);
    return out;
  }
  auto tokenized = OSPREY_TRY(data::loadOrTokenize(path, digest, encode, *dir));
  out.tokens = std::move(tokenized.tokens);
  out.sha256 = tokenized.dataSha256;
  out.note = tokenized.fromCache     ? "tokens from the cache " + tokenized.cachePath
             : tokenized.cacheWritten ? "tokenised and cached in " + tokenized.cachePath
                                      : "tokenised (cache not written: " + tokenized.cacheNote + ")";
  if (!tokenized.cacheDamage.empty())  // a damaged cache is rebuilt, and the run says so
    out.note += " (the cache there was damaged and not read: " + tokenized.cacheDamage + ")";
  return out;
}

}  // namespace

osprey::Result<TokenFile> readTokenFile(const std::string& path, const DataSources& sources,
                                        const Tokenizer& tokenizer, const std::filesystem::path& tokenizerDir) {
  std::error_code ec;
  if (path.find_first_of("*?[") != std::string::npos && !std::filesystem::exists(path, ec))
    return readShards(path, sources.vocab);
  if (osprey::io::looksLikeLlmcShard(path)) return readShard(path, sources.vocab);
  return readText(path, sources.cacheDir, tokenizer, tokenizerDir);
}

osprey::Result<TrainingText> prepareTrainingText(const DataSources& sources, const Tokenizer& tokenizer,
                                                 const std::filesystem::path& tokenizerDir) {
  TokenFile data = OSPREY_TRY(readTokenFile(sources.data, sources, tokenizer, tokenizerDir));
  TrainingText out;
  out.tokens = static_cast<Index>(data.tokens.size());
  out.sha256 = data.sha256;
  out.cacheNote = data.note;
  if (!sources.valData) {
    out.split = data::splitTrainVal(data.tokens);
    return out;
  }
  TokenFile val = OSPREY_TRY(readTokenFile(*sources.valData, sources, tokenizer, tokenizerDir));
  out.cacheNote += "\nvalidation: " + val.note;
  out.split.train = std::move(data.tokens);
  out.split.val = std::move(val.tokens);
  return out;
}

}  // namespace gpt2::train
