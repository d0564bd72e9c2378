// GPT-2's tokenizer: loading and checking the vocabulary and merges, encode and decode
// (see tokenizer.hpp). Finding the files on disk is in tokenizer_files.cpp.
#include "gpt2/tokenizer/tokenizer.hpp"

#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpt2/tokenizer/bpe.hpp"
#include "gpt2/tokenizer/bytes.hpp"
#include "gpt2/tokenizer/pretokenize.hpp"
#include "osprey/io/json_text.hpp"

namespace gpt2 {

namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";

// Words longer than this are encoded without being cached: the cache is for the short words
// that recur, and must not grow with one huge run of letters.
constexpr std::size_t kLongestCachedWord = 128;
constexpr std::size_t kMostCachedWords = 1 << 17;

// A string for an error message: printable ASCII kept, other bytes as \xNN, long ones cut.
std::string printable(std::string_view s) {
  std::string out = "\"";
  const std::size_t shown = std::min<std::size_t>(s.size(), 40);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c >= 0x20 && c < 0x7F) {
      out += char(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (shown < s.size()) out += fmt::format("...\" ({} bytes)", s.size());
  else out += '"';
  return out;
}

osprey::Error fileError(std::string_view file, const std::string& problem) {
  return osprey::Error{fmt::format("{}: {}", file, problem)};
}

// The vocabulary and merges, as read from the files.
struct Tables {
  std::unordered_map<std::string, int> idOfSpelling;  // "Ġworld" -> 995
  std::vector<std::string> spellingOfId;              // 995 -> "Ġworld"
  std::vector<std::string> bytesOfId;                 // 995 -> " world"
  std::array<int, 256> idOfByte{};                    // byte -> its one-byte token
  MergeTable merges;
  int endOfText = -1;
};

// The error for a vocabulary whose ids leave a hole: the first id no token has (with the tokens
// either side, to find the place in the file), and the token that is numbered past the end.
osprey::Error missingIdError(std::string_view name, const std::vector<std::string>& spellingOfId,
                             const std::vector<bool>& seen, const std::string& pastSpelling,
                             const std::string& pastId) {
  const std::size_t count = seen.size();
  std::size_t missing = 0;
  while (missing < count && seen[missing]) ++missing;  // one exists: a token took no slot
  std::size_t holes = 0;
  for (std::size_t id = missing; id < count; ++id) holes += seen[id] ? 0 : 1;
  std::string around;
  if (missing > 0 && seen[missing - 1]) around += "after " + printable(spellingOfId[missing - 1]);
  if (missing + 1 < count && seen[missing + 1])
    around += (around.empty() ? "before " : ", before ") + printable(spellingOfId[missing + 1]);
  return fileError(name, fmt::format("no token has id {}{}{}: a token is missing from the vocabulary (or one is "
                                     "numbered past the end: token {} has id {}, but {} tokens must have ids "
                                     "0..{}, one each)",
                                     missing, around.empty() ? "" : " (" + around + ")",
                                     holes == 2   ? std::string(", nor does 1 more id")
                                     : holes > 2 ? fmt::format(", nor do {} more ids", holes - 1)
                                                 : std::string(),
                                     printable(pastSpelling), pastId, count, count - 1));
}

osprey::Result<void> readVocabulary(std::string_view json, std::string_view name, Tables& state) {
  // The checked reader: a spelling given twice (two ids for one token) is an error naming it.
  const nlohmann::json parsed = OSPREY_TRY(osprey::io::parseJson(json, std::string(name)));
  if (!parsed.is_object()) {
    return fileError(name, "expected a JSON object mapping token spellings to ids");
  }
  if (parsed.empty()) return fileError(name, "the vocabulary is empty");
  const std::size_t count = parsed.size();
  if (count > (std::size_t{1} << 24)) {
    return fileError(name, fmt::format("{} tokens is more than this tokenizer accepts", count));
  }

  state.spellingOfId.assign(count, std::string());
  state.bytesOfId.assign(count, std::string());
  std::vector<bool> seen(count, false);
  state.idOfSpelling.reserve(count);
  // The first token numbered past the end ("b": 7 among 2 tokens). Ids must be 0..count-1, one
  // each, so such a token means some id below has no token: usually one token was deleted, and
  // the token to blame is the missing one, not the last (<|endoftext|>) that now looks too high.
  std::optional<std::pair<std::string, std::string>> pastTheEnd;  // spelling, id as written
  for (const auto& [spelling, value] : parsed.items()) {
    if (!value.is_number_integer()) {
      return fileError(name, fmt::format("token {} has a non-integer id ({})", printable(spelling),
                                         value.type_name()));
    }
    // Ids too large for int64 would wrap in get<int64_t>(): name them as they are written.
    if (value.is_number_unsigned() && value.get<std::uint64_t>() >= count) {
      if (!pastTheEnd) pastTheEnd.emplace(spelling, std::to_string(value.get<std::uint64_t>()));
      continue;
    }
    const auto id = value.get<std::int64_t>();
    if (id < 0 || id >= std::int64_t(count)) {
      return fileError(name, fmt::format("token {} has id {}, but ids must be 0..{} (one per "
                                         "token, {} tokens)",
                                         printable(spelling), id, count - 1, count));
    }
    if (seen[std::size_t(id)]) {
      return fileError(name, fmt::format("id {} is given to two tokens ({} and {})", id,
                                         printable(state.spellingOfId[std::size_t(id)]), printable(spelling)));
    }
    if (spelling.empty()) return fileError(name, fmt::format("token {} is the empty string", id));
    auto bytes = bytes::spellingToBytes(spelling);
    if (!bytes) {
      return fileError(name, fmt::format("token {} (id {}) uses a character outside GPT-2's byte "
                                         "alphabet",
                                         printable(spelling), id));
    }
    seen[std::size_t(id)] = true;
    state.spellingOfId[std::size_t(id)] = spelling;
    state.bytesOfId[std::size_t(id)] = std::move(*bytes);
    state.idOfSpelling.emplace(spelling, int(id));
  }
  if (pastTheEnd) return missingIdError(name, state.spellingOfId, seen, pastTheEnd->first, pastTheEnd->second);

  const auto& alphabet = bytes::byteToCodePoint();
  for (unsigned b = 0; b < 256; ++b) {
    const std::string spelling = bytes::utf8Encode(alphabet[b]);
    const auto it = state.idOfSpelling.find(spelling);
    if (it == state.idOfSpelling.end()) {
      return fileError(name, fmt::format("no token for byte 0x{:02x} (spelled {}): the vocabulary "
                                         "must hold all 256 byte symbols",
                                         b, printable(spelling)));
    }
    state.idOfByte[b] = it->second;
  }

  const auto eot = state.idOfSpelling.find(std::string(kEndOfText));
  if (eot == state.idOfSpelling.end()) {
    return fileError(name, fmt::format("no {} token", printable(kEndOfText)));
  }
  state.endOfText = eot->second;
  return osprey::success();
}

osprey::Result<void> readMerges(std::string_view text, std::string_view name, Tables& state) {
  int rank = 0;
  std::size_t lineNumber = 0;
  std::size_t at = 0;
  state.merges.reserve(state.spellingOfId.size());
  std::vector<bool> made(state.spellingOfId.size(), false);  // tokens some merge produces
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++lineNumber;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // The first line may be the format header, "#version: 0.2 ..." (other lines starting
    // with '#' are merges: '#' is a byte symbol).
    if (lineNumber == 1 && line.starts_with("#version")) continue;
    if (line.empty()) continue;

    const std::size_t space = line.find(' ');
    const bool twoParts = space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                          line.find(' ', space + 1) == std::string_view::npos;
    if (!twoParts) {
      return fileError(name, fmt::format("line {}: expected two symbols separated by one space, "
                                         "got {}",
                                         lineNumber, printable(line)));
    }
    const std::string left(line.substr(0, space));
    const std::string right(line.substr(space + 1));
    const auto leftId = state.idOfSpelling.find(left);
    const auto rightId = state.idOfSpelling.find(right);
    const auto mergedId = state.idOfSpelling.find(left + right);
    for (const auto& [part, found] : {std::pair{&left, leftId}, std::pair{&right, rightId}}) {
      if (found == state.idOfSpelling.end()) {
        return fileError(name, fmt::format("line {}: symbol {} is not in the vocabulary", lineNumber,
                                           printable(*part)));
      }
    }
    if (mergedId == state.idOfSpelling.end()) {
      return fileError(name, fmt::format("line {}: the merged token {} is not in the vocabulary",
                                         lineNumber, printable(left + right)));
    }
    state.merges.add(leftId->second, rightId->second, Merge{rank, mergedId->second});
    made[static_cast<std::size_t>(mergedId->second)] = true;
    ++rank;
  }
  // Every token longer than one byte (but the end-of-text marker) is some merge's product, or BPE
  // can never emit it: an empty or cut-short merges file would tokenise into bytes without a word.
  for (std::size_t id = 0; id < made.size(); ++id) {
    if (made[id] || state.bytesOfId[id].size() <= 1 || static_cast<int>(id) == state.endOfText) continue;
    return fileError(name, fmt::format("the vocabulary's token {} (id {}) is made by no merge: the merges file "
                                       "is incomplete ({} merges read)",
                                       printable(state.spellingOfId[id]), id, rank));
  }
  return osprey::success();
}

}  // namespace

struct Tokenizer::State {
  Tables tables;
  Pretokenizer pretokenizer;
  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int>> cache;  // word bytes -> ids
};

osprey::Result<Tokenizer> Tokenizer::fromContents(std::string_view vocabJson, std::string_view merges,
                                                  std::string_view vocabName, std::string_view mergesName) {
  Tables tables;
  OSPREY_CHECK(readVocabulary(vocabJson, vocabName, tables));
  OSPREY_CHECK(readMerges(merges, mergesName, tables));
  auto pretokenizer = OSPREY_TRY(Pretokenizer::create());
  return Tokenizer(std::shared_ptr<State>(new State{std::move(tables), std::move(pretokenizer), {}, {}}));
}

osprey::Result<std::vector<int>> Tokenizer::encode(std::string_view text) const {
  const State& s = *m_state;
  const auto pieces = OSPREY_TRY(s.pretokenizer.split(text));
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<int> symbols;

  std::lock_guard lock(s.cacheMutex);
  for (const std::string_view piece : pieces) {
    const bool cacheable = piece.size() <= kLongestCachedWord;
    if (cacheable) {
      if (const auto hit = s.cache.find(std::string(piece)); hit != s.cache.end()) {
        ids.insert(ids.end(), hit->second.begin(), hit->second.end());
        continue;
      }
    }
    symbols.clear();
    for (const char c : piece) symbols.push_back(s.tables.idOfByte[static_cast<unsigned char>(c)]);
    std::vector<int> word = applyMerges(s.tables.merges, symbols);
    ids.insert(ids.end(), word.begin(), word.end());
    if (cacheable) {
      if (s.cache.size() >= kMostCachedWords) s.cache.clear();
      s.cache.emplace(std::string(piece), std::move(word));
    }
  }
  return ids;
}

osprey::Result<std::string> Tokenizer::decode(std::span<const int> ids) const {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocabSize()) {
      return osprey::Error{fmt::format("cannot decode token id {} (position {}): ids are 0..{}",
                                       ids[i], i, vocabSize() - 1)};
    }
    text += m_state->tables.bytesOfId[std::size_t(ids[i])];
  }
  return text;
}

osprey::Result<std::string> Tokenizer::tokenText(int id) const {
  if (id < 0 || id >= vocabSize()) {
    return osprey::Error{fmt::format("unknown token id {}: ids are 0..{}", id, vocabSize() - 1)};
  }
  return m_state->tables.bytesOfId[std::size_t(id)];
}

osprey::Result<std::string> Tokenizer::tokenSpelling(int id) const {
  if (id < 0 || id >= vocabSize()) {
    return osprey::Error{fmt::format("unknown token id {}: ids are 0..{}", id, vocabSize() - 1)};
  }
  return m_state->tables.spellingOfId[std::size_t(id)];
}

int Tokenizer::vocabSize() const { return int(m_state->tables.spellingOfId.size()); }

int Tokenizer::eotToken() const { return m_state->tables.endOfText; }

}  // namespace gpt2
