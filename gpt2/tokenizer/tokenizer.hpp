// GPT-2's byte-level BPE tokenizer: text <-> token ids, exactly as OpenAI's encoder.
//
// Loaded from a directory holding the Hugging Face files (vocab.json + merges.txt) or OpenAI's
// (encoder.json + vocab.bpe); they are the same data under two names. Encoding is
// pre-tokenisation with GPT-2's pattern (tokenizer_pretokenize.hpp), then BPE on each piece's
// bytes (tokenizer_bpe.hpp). Any byte string can be encoded, including invalid UTF-8 and NULs,
// and decode(encode(s)) == s for every s. "<|endoftext|>" in text is encoded as ordinary text,
// as OpenAI's encoder does; eotToken() gives its id for callers that want it as a separator.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "osprey/result.hpp"

namespace gpt2 {

class Tokenizer {
 public:
  // Reads the tokenizer files in `dir` (vocab.json + merges.txt, else encoder.json + vocab.bpe).
  // Errors name the file and the problem: missing file, bad JSON, malformed merge line, ...
  static osprey::Result<Tokenizer> load(const std::filesystem::path& dir);

  // The same from the two files' contents (what a fuzz target feeds); the names are only used
  // in error messages.
  static osprey::Result<Tokenizer> fromContents(std::string_view vocabJson, std::string_view merges,
                                                std::string_view vocabName = "vocab.json",
                                                std::string_view mergesName = "merges.txt");

  // Token ids of `text` (any bytes). Fails only on a regex-engine resource error.
  osprey::Result<std::vector<int>> encode(std::string_view text) const;

  // The bytes that `ids` stand for; an id outside 0..vocabSize()-1 is an error naming it.
  osprey::Result<std::string> decode(std::span<const int> ids) const;

  // The bytes of one token (possibly part of a UTF-8 character); error for an unknown id.
  osprey::Result<std::string> tokenText(int id) const;

  // How the vocabulary spells a token, e.g. "Ġworld" for 995; error for an unknown id.
  osprey::Result<std::string> tokenSpelling(int id) const;

  int vocabSize() const;
  int eotToken() const;  // "<|endoftext|>": 50256 for GPT-2

 private:
  struct State;
  explicit Tokenizer(std::shared_ptr<State> state) : m_state(std::move(state)) {}
  std::shared_ptr<State> m_state;  // copies share the (immutable) tables and the word cache
};

// Whether `dir` holds a tokenizer under either naming.
bool hasTokenizerFiles(const std::filesystem::path& dir);

// Where the tokenizer files are, first found of:
//   1. modelDir, when given and it holds them;
//   2. the copy scripts/fetch-tokenizer.sh fetches into <source>/.cache/gpt2-tokenizer/;
// The error lists the places looked at and how to fetch the files.
osprey::Result<std::filesystem::path> findTokenizerDir(
    const std::optional<std::filesystem::path>& modelDir = std::nullopt);

}  // namespace gpt2
