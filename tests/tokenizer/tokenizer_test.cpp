// GPT-2 tokenizer: ids against independent implementations (the goldens under tests/golden/,
// made by tools/oracle/), exact round trips of any bytes, the BPE loop against a direct
// transcription of OpenAI's, and an error naming the file and problem for every bad input.
#include <gtest/gtest.h>

#include "gpt2/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/tokenizer/bytes.hpp"

namespace {

namespace fs = std::filesystem;
using gpt2::Tokenizer;

const fs::path kGpt2Files = fs::path(OSPREY_TEST_TOKENIZER_DIR);  // scripts/fetch-tokenizer.sh
const fs::path kShakespeare = fs::path(OSPREY_TEST_SHAKESPEARE);
const fs::path kGoldens = fs::path(OSPREY_SOURCE_DIR) / "tests" / "golden";

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const fs::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

using gpt2::testing::TempDir;

// The real GPT-2 tokenizer, loaded once for the whole binary.
const Tokenizer& gpt2Tokenizer() {
  static const Tokenizer tokenizer = [] {
    auto loaded = Tokenizer::load(kGpt2Files);
    if (!loaded) throw std::runtime_error(loaded.error().message);
    return *loaded;
  }();
  return tokenizer;
}

std::vector<int> encodeOk(const Tokenizer& t, std::string_view text) {
  auto ids = t.encode(text);
  EXPECT_TRUE(ids.ok()) << (ids.ok() ? "" : ids.error().message);
  return ids.ok() ? *ids : std::vector<int>{};
}

std::string decodeOk(const Tokenizer& t, const std::vector<int>& ids) {
  auto text = t.decode(ids);
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
  return text.ok() ? *text : std::string{};
}

// The goldens' fingerprint of a long id sequence: FNV-1a 64 over each id's 4 little-endian bytes.
std::uint64_t fnv1a64(const std::vector<int>& ids) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const int id : ids) {
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<std::uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x100000001b3ULL;
    }
  }
  return h;
}

std::string hex16(std::uint64_t v) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(v));
  return buffer;
}

// ------------------------------------------------------------------------------------------
// Exactness against the reference and the oracles.

TEST(Gpt2Tokenizer, LoadsTheRealFiles) {
  const Tokenizer& t = gpt2Tokenizer();
  EXPECT_EQ(t.vocabSize(), 50257);
  EXPECT_EQ(t.eotToken(), 50256);
  EXPECT_EQ(*t.tokenText(995), " world");
  EXPECT_EQ(*t.tokenSpelling(995), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(*t.tokenText(50256), "<|endoftext|>");
}

TEST(Gpt2Tokenizer, DesignExamplesAreExact) {
  const Tokenizer& t = gpt2Tokenizer();
  EXPECT_EQ(encodeOk(t, "Hello world"), (std::vector<int>{15496, 995}));
  EXPECT_EQ(encodeOk(t, "The capital of France is"), (std::vector<int>{464, 3139, 286, 4881, 318}));
  EXPECT_EQ(decodeOk(t, {464, 3139, 286, 4881, 318}), "The capital of France is");
}

void expectGoldens(const fs::path& file, const char* idsKey) {
  const auto golden = nlohmann::json::parse(readFile(file));
  const Tokenizer& t = gpt2Tokenizer();
  ASSERT_GE(golden.at("cases").size(), 50u) << file;
  for (const auto& c : golden.at("cases")) {
    const std::string name = c.at("name");
    const std::string text = c.at("text");
    const std::vector<int> expected = c.at(idsKey);
    EXPECT_EQ(encodeOk(t, text), expected) << file.filename() << ": " << name;
    EXPECT_EQ(decodeOk(t, expected), text) << file.filename() << ": " << name;
  }
}

TEST(Gpt2Tokenizer, MatchesTheJavaScriptOracle) {
  expectGoldens(kGoldens / "tokenizer_ids.json", "ids");
}

TEST(Gpt2Tokenizer, MatchesOpenAIsAlgorithmInPython) {
  // Includes the cases the JavaScript oracle cannot do (U+0085, U+FEFF).
  expectGoldens(kGoldens / "tokenizer_reference_ids.json", "ids");
}

TEST(Gpt2Tokenizer, WhitespaceIsUnicodeWhiteSpaceAsInGpt2) {
  // GPT-2's \s (Python regex) is White_Space: U+0085 is a space, U+180E and U+FEFF are not.
  const Tokenizer& t = gpt2Tokenizer();
  const auto golden = nlohmann::json::parse(readFile(kGoldens / "tokenizer_ids.json"));
  ASSERT_EQ(golden.at("excluded").size(), 2u);
  for (const auto& c : golden.at("excluded")) {
    // The JavaScript port differs from GPT-2 here, so we must differ from it.
    EXPECT_NE(encodeOk(t, c.at("text").get<std::string>()), c.at("oracle_ids").get<std::vector<int>>())
        << c.at("name");
  }
}

TEST(Gpt2Tokenizer, TinyShakespeareMatchesTheOracleQuickly) {
  const Tokenizer& t = gpt2Tokenizer();
  const std::string text = readFile(kShakespeare);
  const auto golden = nlohmann::json::parse(readFile(kGoldens / "tokenizer_ids.json"));
  const auto& corpus = golden.at("corpora").at(0);
  ASSERT_EQ(text.size(), corpus.at("bytes").get<std::size_t>());

  // A fresh tokenizer, so the timing includes filling the word cache.
  auto fresh = Tokenizer::load(kGpt2Files);
  ASSERT_TRUE(fresh.ok());
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int> ids = encodeOk(*fresh, text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("encode_seconds", std::to_string(seconds));
  std::printf("[ timing   ] tinyshakespeare (%zu bytes -> %zu tokens) encoded in %.3f s\n", text.size(),
              ids.size(), seconds);

  EXPECT_EQ(ids.size(), corpus.at("tokens").get<std::size_t>());
  EXPECT_EQ(hex16(fnv1a64(ids)), corpus.at("fnv1a64_ids").get<std::string>());
  const std::vector<int> first = corpus.at("first_ids");
  ASSERT_GE(ids.size(), first.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), ids.begin()));
  EXPECT_EQ(decodeOk(t, ids), text);
  // "Well under a couple of seconds" in an optimised build; generous for sanitizer builds.
  EXPECT_LT(seconds, 20.0);
}

TEST(Gpt2Tokenizer, OpenAIFileNamesLoadTheSameTokenizer) {
  TempDir dir;
  fs::copy_file(kGpt2Files / "vocab.json", dir.path() / "encoder.json");
  fs::copy_file(kGpt2Files / "merges.txt", dir.path() / "vocab.bpe");
  auto t = Tokenizer::load(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(encodeOk(*t, "Hello world"), (std::vector<int>{15496, 995}));
}

TEST(Gpt2Tokenizer, FetchedCopyLoadsTheSameTokenizer) {
  const fs::path fetched = fs::path(OSPREY_SOURCE_DIR) / ".cache" / "gpt2-tokenizer";
  if (!gpt2::hasTokenizerFiles(fetched)) GTEST_SKIP() << "scripts/fetch-tokenizer.sh has not been run";
  auto t = Tokenizer::load(fetched);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(encodeOk(*t, "The capital of France is"), (std::vector<int>{464, 3139, 286, 4881, 318}));
}

// ------------------------------------------------------------------------------------------
// Any bytes round-trip; encode never fails on input.

TEST(Gpt2Tokenizer, RandomByteStringsRoundTrip) {
  const Tokenizer& t = gpt2Tokenizer();
  std::mt19937 rng(20240531);
  // Pieces that stress the regex: valid multi-byte characters, invalid and truncated sequences,
  // NULs, spaces and contractions.
  const std::vector<std::string> pieces = {
      "a", "Z", " ", "  ", "\n", "\t", "'s", "'ll", "9", std::string(1, '\0'), "\xC3\xA9", "\xE6\x97\xA5",
      "\xF0\x9F\x91\x8B", "\xC2\x85", "\xE1\xA0\x8E", "\xEF\xBB\xBF", "\x80", "\xBF", "\xC3", "\xE6\x97",
      "\xF0\x9F\x91", "\xFF", "\xFE", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80",
      "!", "..."};
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    const int length = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int i = 0; i < length; ++i) {
      if (rng() % 3 == 0) {
        s += char(rng() & 0xFF);  // any byte at all
      } else {
        s += pieces[rng() % pieces.size()];
      }
    }
    const std::vector<int> ids = encodeOk(t, s);
    for (const int id : ids) ASSERT_TRUE(id >= 0 && id < t.vocabSize());
    ASSERT_EQ(decodeOk(t, ids), s) << "round " << round;
  }
}

TEST(Gpt2Tokenizer, EveryByteAloneIsItsByteToken) {
  const Tokenizer& t = gpt2Tokenizer();
  for (int b = 0; b < 256; ++b) {
    const std::string s(1, char(b));
    const std::vector<int> ids = encodeOk(t, s);
    ASSERT_EQ(ids.size(), 1u) << "byte " << b;
    EXPECT_EQ(*t.tokenText(ids[0]), s);
  }
}

TEST(Gpt2Tokenizer, InvalidUtf8IsCutAtTheInvalidBytes) {
  const Tokenizer& t = gpt2Tokenizer();
  // A lone 0xFF between words: the words tokenize as they would alone.
  const std::vector<int> hello = encodeOk(t, "Hello");
  const std::vector<int> world = encodeOk(t, " world");
  std::vector<int> expected = hello;
  expected.push_back(encodeOk(t, "\xFF").at(0));
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(encodeOk(t, "Hello\xFF world"), expected);
}

TEST(Gpt2Tokenizer, LongRunsAreFastAndRoundTrip) {
  const Tokenizer& t = gpt2Tokenizer();
  std::mt19937 rng(7);
  std::string letters(200000, 'a');
  for (char& c : letters) c = char('a' + rng() % 26);
  const std::vector<std::string> inputs = {std::string(300000, 'a'), letters, std::string(100000, ' '),
                                           std::string(100000, '\n') + "x", std::string(50000, '!'),
                                           std::string(100000, '\xFF')};
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& s : inputs) EXPECT_EQ(decodeOk(t, encodeOk(t, s)), s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0);  // quadratic BPE would take minutes here
}

// ------------------------------------------------------------------------------------------
// The BPE loop against a direct transcription of OpenAI's (encoder.py's bpe()).

using Ranks = std::map<std::pair<std::string, std::string>, int>;

std::vector<std::string> openAiBpe(std::vector<std::string> word, const Ranks& ranks) {
  while (word.size() > 1) {
    int bestRank = -1;
    std::pair<std::string, std::string> best;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = ranks.find({word[i], word[i + 1]});
      if (it != ranks.end() && (bestRank < 0 || it->second < bestRank)) {
        bestRank = it->second;
        best = it->first;
      }
    }
    if (bestRank < 0) break;
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == best.first && word[i + 1] == best.second) {
        merged.push_back(best.first + best.second);
        i += 2;
      } else {
        merged.push_back(word[i]);
        i += 1;
      }
    }
    word = std::move(merged);
  }
  return word;
}

// A vocabulary JSON with the 256 byte symbols (ids 0..255), `extra` next, then <|endoftext|>.
std::string vocabularyJson(const std::vector<std::string>& extra) {
  nlohmann::json v = nlohmann::json::object();
  const auto& alphabet = gpt2::bytes::byteToCodePoint();
  int id = 0;
  for (int b = 0; b < 256; ++b) v[gpt2::bytes::utf8Encode(alphabet[b])] = id++;
  for (const auto& token : extra) v[token] = id++;
  v["<|endoftext|>"] = id++;
  return v.dump();
}

TEST(Gpt2Tokenizer, BpeMatchesOpenAIsLoopOnRealWords) {
  const Tokenizer& t = gpt2Tokenizer();
  Ranks ranks;
  {
    std::istringstream merges(readFile(kGpt2Files / "merges.txt"));
    std::string line;
    std::getline(merges, line);  // "#version: 0.2"
    int rank = 0;
    while (std::getline(merges, line)) {
      if (line.empty()) continue;
      const auto space = line.find(' ');
      ranks[{line.substr(0, space), line.substr(space + 1)}] = rank++;
    }
  }
  const auto vocab = nlohmann::json::parse(readFile(kGpt2Files / "vocab.json"));
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    // Lower-case words (one pre-token each), some long, so many merges interact.
    const int length = 1 + int(rng() % (round < 300 ? 16 : 200));
    std::string word;
    for (int i = 0; i < length; ++i) word += char("etaoinshrdlucmfwypvbgkjqxz"[rng() % (rng() % 2 ? 8 : 26)]);
    std::vector<std::string> symbols;
    for (const char c : word) symbols.push_back(std::string(1, c));
    std::vector<int> expected;
    for (const auto& s : openAiBpe(symbols, ranks)) expected.push_back(vocab.at(s).get<int>());
    ASSERT_EQ(encodeOk(t, word), expected) << word;
  }
}

TEST(Gpt2Tokenizer, BpeMatchesOpenAIsLoopOnUnusualMerges) {
  // "ab a" ranks before "a b": merging "a b" everywhere first must win, so "abab" -> "ab" "ab"
  // (merging "ab a" as soon as it appears would give "aba" "b").
  auto small = Tokenizer::fromContents(vocabularyJson({"ab", "aba"}), "#version: 0.2\nab a\na b\n");
  ASSERT_TRUE(small.ok()) << small.error().message;
  const int ab = 256;
  EXPECT_EQ(encodeOk(*small, "abab"), (std::vector<int>{ab, ab}));

  // Random merge lists over {a, b, c} in random rank order (including merges that reuse a
  // token and ones listed before their parts exist), against the transcription.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<std::string> tokens = {"a", "b", "c"};
    std::vector<std::string> extra;
    std::vector<std::pair<std::string, std::string>> pairs;
    for (int m = 0; m < 25; ++m) {
      const std::string x = tokens[rng() % tokens.size()];
      const std::string y = tokens[rng() % tokens.size()];
      if (std::find(pairs.begin(), pairs.end(), std::pair{x, y}) != pairs.end()) continue;
      if ((x + y).size() > 6) continue;
      pairs.emplace_back(x, y);
      if (std::find(tokens.begin(), tokens.end(), x + y) == tokens.end()) {
        tokens.push_back(x + y);
        extra.push_back(x + y);
      }
    }
    std::shuffle(pairs.begin(), pairs.end(), rng);
    std::string mergesText = "#version: 0.2\n";
    Ranks ranks;
    for (std::size_t r = 0; r < pairs.size(); ++r) {
      mergesText += pairs[r].first + " " + pairs[r].second + "\n";
      ranks[pairs[r]] = int(r);
    }
    auto t = Tokenizer::fromContents(vocabularyJson(extra), mergesText);
    ASSERT_TRUE(t.ok()) << t.error().message;
    for (int w = 0; w < 40; ++w) {
      std::string word;
      const int length = 1 + int(rng() % 24);
      for (int i = 0; i < length; ++i) word += char('a' + rng() % 3);
      std::vector<std::string> symbols;
      for (const char c : word) symbols.push_back(std::string(1, c));
      std::vector<std::string> expected = openAiBpe(symbols, ranks);
      std::vector<std::string> got;
      for (const int id : encodeOk(*t, word)) got.push_back(*t->tokenText(id));
      ASSERT_EQ(got, expected) << "trial " << trial << " word " << word << "\n" << mergesText;
    }
  }
}

// ------------------------------------------------------------------------------------------
// Errors.

void expectLoadError(const fs::path& dir, const std::vector<std::string>& fragments) {
  auto t = Tokenizer::load(dir);
  ASSERT_FALSE(t.ok());
  for (const auto& fragment : fragments) {
    EXPECT_NE(t.error().message.find(fragment), std::string::npos)
        << "error \"" << t.error().message << "\" lacks \"" << fragment << "\"";
  }
}

void expectContentsError(std::string_view vocab, std::string_view merges,
                         const std::vector<std::string>& fragments) {
  auto t = Tokenizer::fromContents(vocab, merges);
  ASSERT_FALSE(t.ok()) << "accepted vocab " << vocab.substr(0, 80) << " merges " << merges.substr(0, 80);
  for (const auto& fragment : fragments) {
    EXPECT_NE(t.error().message.find(fragment), std::string::npos)
        << "error \"" << t.error().message << "\" lacks \"" << fragment << "\"";
  }
}

TEST(Gpt2TokenizerErrors, MissingDirectoryAndFiles) {
  TempDir dir;
  expectLoadError(dir.path() / "nowhere", {"nowhere", "does not exist"});
  expectLoadError(dir.path(), {dir.path().string(), "no tokenizer files"});
  writeFile(dir.path() / "vocab.json", vocabularyJson({}));
  expectLoadError(dir.path(), {"merges.txt", "missing"});
  fs::remove(dir.path() / "vocab.json");
  writeFile(dir.path() / "vocab.bpe", "#version: 0.2\n");
  expectLoadError(dir.path(), {"encoder.json", "missing"});
}

TEST(Gpt2TokenizerErrors, BadFilesAreNamed) {
  TempDir dir;
  writeFile(dir.path() / "vocab.json", "{\"a\": 0,");
  writeFile(dir.path() / "merges.txt", "#version: 0.2\n");
  expectLoadError(dir.path(), {(dir.path() / "vocab.json").string(), "not valid JSON"});
  writeFile(dir.path() / "vocab.json", vocabularyJson({}));
  writeFile(dir.path() / "merges.txt", "#version: 0.2\na b c\n");
  expectLoadError(dir.path(), {(dir.path() / "merges.txt").string(), "line 2", "two symbols"});
}

TEST(Gpt2TokenizerErrors, MalformedVocabulary) {
  const std::string merges = "#version: 0.2\n";
  expectContentsError("", merges, {"vocab.json", "not valid JSON"});
  expectContentsError("[1, 2]", merges, {"vocab.json", "JSON object"});
  expectContentsError("{}", merges, {"vocab.json", "empty"});
  expectContentsError("{\"a\": \"zero\"}", merges, {"vocab.json", "non-integer id"});
  expectContentsError("{\"a\": 1.5}", merges, {"vocab.json", "non-integer id"});
  expectContentsError("{\"a\": 0, \"b\": 7}", merges, {"vocab.json", "has id 7", "0..1"});
  expectContentsError("{\"a\": 0, \"b\": -1}", merges, {"vocab.json", "has id -1"});
  expectContentsError("{\"a\": 0, \"b\": 18446744073709551615}", merges,
                      {"vocab.json", "has id 18446744073709551615"});
  expectContentsError("{\"a\": 0, \"b\": 0}", merges, {"vocab.json", "id 0 is given to two tokens"});
  expectContentsError("{\"a b\": 0}", merges, {"vocab.json", "outside GPT-2's byte alphabet"});
  expectContentsError("{\"\": 0}", merges, {"vocab.json", "empty string"});
  // Without the newline byte's symbol "Ċ" (U+010A): ids 0..255 minus one, plus <|endoftext|>.
  {
    auto v = nlohmann::json::parse(vocabularyJson({}));
    v.erase("\xC4\x8A");
    v["<|endoftext|>"] = 10;  // keep ids 0..255 contiguous
    expectContentsError(v.dump(), merges, {"vocab.json", "byte 0x0a", "256 byte symbols"});
  }
  {
    auto v = nlohmann::json::parse(vocabularyJson({}));
    v.erase("<|endoftext|>");
    expectContentsError(v.dump(), merges, {"vocab.json", "<|endoftext|>"});
  }
}

TEST(Gpt2TokenizerErrors, MalformedMerges) {
  const std::string vocab = vocabularyJson({"ab"});
  expectContentsError(vocab, "#version: 0.2\nab\n", {"merges.txt", "line 2", "two symbols"});
  expectContentsError(vocab, "#version: 0.2\na  b\n", {"merges.txt", "line 2", "two symbols"});
  expectContentsError(vocab, "#version: 0.2\n a\n", {"merges.txt", "line 2"});
  expectContentsError(vocab, "a b\na b c\n", {"merges.txt", "line 2"});
  expectContentsError(vocab, "#version: 0.2\na b\nx\xE2\x82\xAC b\n",
                      {"merges.txt", "line 3", "not in the vocabulary"});
  expectContentsError(vocab, "#version: 0.2\nb a\n", {"merges.txt", "line 2", "\"ba\"", "not in the vocabulary"});
  // A good file, with a header, CRLF line ends and no final newline, is accepted.
  auto ok = Tokenizer::fromContents(vocab, "#version: 0.2\r\na b");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(encodeOk(*ok, "ab"), (std::vector<int>{256}));
}

TEST(Gpt2TokenizerErrors, UnknownIds) {
  const Tokenizer& t = gpt2Tokenizer();
  for (const int bad : {-1, 50257, 1 << 30}) {
    const std::vector<int> ids = {15496, bad};
    auto text = t.decode(ids);
    ASSERT_FALSE(text.ok());
    EXPECT_NE(text.error().message.find(std::to_string(bad)), std::string::npos) << text.error().message;
    EXPECT_FALSE(t.tokenText(bad).ok());
    EXPECT_FALSE(t.tokenSpelling(bad).ok());
  }
}

TEST(Gpt2TokenizerErrors, GarbageContentsNeverCrash) {
  // What the libFuzzer target does, briefly: random and mutated inputs give a Result.
  const std::string vocab = vocabularyJson({"ab", "abc"});
  const std::string merges = "#version: 0.2\na b\nab c\n";
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    std::string v = vocab;
    std::string m = merges;
    for (int k = 0; k < 3; ++k) {
      if (!v.empty()) v[rng() % v.size()] = char(rng() & 0xFF);
      if (!m.empty()) m[rng() % m.size()] = char(rng() & 0xFF);
    }
    auto t = Tokenizer::fromContents(v, m);
    if (t.ok()) {
      const std::string text = "abc " + v.substr(0, 64);
      EXPECT_EQ(decodeOk(*t, encodeOk(*t, text)), text);
    }
  }
}

// ------------------------------------------------------------------------------------------
// Finding the files.

TEST(Gpt2TokenizerFiles, ModelDirectoryComesFirst) {
  TempDir dir;
  fs::copy_file(kGpt2Files / "vocab.json", dir.path() / "vocab.json");
  fs::copy_file(kGpt2Files / "merges.txt", dir.path() / "merges.txt");
  auto found = gpt2::findTokenizerDir(dir.path());
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(*found, dir.path());
}

TEST(Gpt2TokenizerFiles, FallsBackWhenTheModelDirectoryHasNone) {
  TempDir dir;  // e.g. a checkpoint folder with weights only
  auto found = gpt2::findTokenizerDir(dir.path());
  ASSERT_TRUE(found.ok()) << found.error().message;  // the fetched copy or the shared data
  EXPECT_NE(*found, dir.path());
  EXPECT_TRUE(gpt2::hasTokenizerFiles(*found));
  auto fallback = gpt2::findTokenizerDir();
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(*fallback, *found);
}

// A merges file that is empty or cut short leaves tokens BPE can never emit: refused, naming the
// first such token, instead of a tokenizer that quietly spells words out byte by byte.
TEST(Gpt2Tokenizer, MergesThatMakeNotEveryTokenAreRefused) {
  const std::string vocab = readFile(kGpt2Files / "vocab.json");
  const std::string merges = readFile(kGpt2Files / "merges.txt");
  for (const std::string& cut : {std::string(), std::string("#version: 0.2\n"),
                                 merges.substr(0, merges.rfind('\n', merges.size() - 2) + 1)}) {
    auto t = Tokenizer::fromContents(vocab, cut);
    ASSERT_FALSE(t.ok()) << cut.size();
    EXPECT_NE(t.error().message.find("is made by no merge: the merges file is incomplete"), std::string::npos)
        << t.error().message;
  }
  auto whole = Tokenizer::fromContents(vocab, merges);
  EXPECT_TRUE(whole.ok()) << whole.error().message;
  // A vocabulary of bytes alone needs no merges.
  EXPECT_TRUE(Tokenizer::fromContents(vocabularyJson({}), "").ok());
}

}  // namespace
