// libFuzzer target: arbitrary bytes as an llm.c token shard (the `.bin` files of llm.c's dev/data
// scripts: a 256-int32 header {20240520, 1, N, 0...}, then N uint16 tokens), read as
// `osprey-gpt2 train --data FILE` reads it: train::readTokenFile (gpt2/train/data.cpp), which
// tells a shard from a text by its magic, and osprey::io::readLlmcShard (src/io/llmc_shard.cpp).
//
// An input that starts with the shard magic (88 d8 34 01) is the whole file. Any other input is
// the token section: the target writes a well-formed header before it (version 1, the count its
// bytes give), so the fuzzer reaches the tokens and the model's vocabulary (both kinds are in the
// seeds, fuzz/make-seeds.py). The reader must never crash or read past the file, and must accept
// exactly the files the layout allows, checked here against a reading of the bytes of our own:
// the magic, version 1, a count above 0 that the file's length holds exactly (no truncated, odd
// or trailing bytes), every token below the vocabulary (GPT-2's 50257, and 300 to reach that
// check with short inputs). A refusal names the file. An accepted shard is the file's tokens, in
// order, the same read alone and as a pattern of one shard (`shard-*.bin`, llm.c's -i), and
// writeLlmcShard writes it back as the same bytes (with the header's unused ints zero).
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "gpt2/tokenizer/bytes.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/train/data.hpp"
#include "gpt2/train/data_sha256.hpp"
#include "osprey/io/llmc_shard.hpp"

using osprey_fuzz::require;

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic("\x88\xd8\x34\x01", 4);  // 20240520, little-endian
constexpr osprey::Index kVocabs[] = {50257, 300};

std::int64_t intAt(std::string_view bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v |= std::uint32_t(static_cast<unsigned char>(bytes[at + k])) << (8 * k);
  return static_cast<std::int32_t>(v);
}

void appendInt(std::string& bytes, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

std::string readBack(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What the layout allows, from the bytes alone: the tokens, or nothing.
std::optional<std::vector<std::int32_t>> expectedTokens(std::string_view file, osprey::Index vocab) {
  if (file.size() < osprey::io::kLlmcShardHeaderBytes) return std::nullopt;
  if (file.substr(0, 4) != kMagic || intAt(file, 4) != 1) return std::nullopt;
  const std::int64_t count = intAt(file, 8);
  const std::size_t body = file.size() - osprey::io::kLlmcShardHeaderBytes;
  if (count <= 0 || body % 2 != 0 || body / 2 != static_cast<std::uint64_t>(count)) return std::nullopt;
  std::vector<std::int32_t> tokens;
  for (std::size_t at = osprey::io::kLlmcShardHeaderBytes; at < file.size(); at += 2) {
    const std::int32_t t = static_cast<unsigned char>(file[at]) | (static_cast<unsigned char>(file[at + 1]) << 8);
    if (t >= vocab) return std::nullopt;
    tokens.push_back(t);
  }
  return tokens;
}

struct Setup {
  fs::path dir = osprey_fuzz::scratchDir() / "shards";
  fs::path shard = dir / "shard-0.bin";
  fs::path copy = osprey_fuzz::scratchDir() / "copy.bin";
  gpt2::Tokenizer tokenizer;  // never reached by a shard; readTokenFile takes one for texts

  Setup() : tokenizer(byteTokenizer()) { fs::create_directories(dir); }

  static gpt2::Tokenizer byteTokenizer() {
    std::string vocab = "{";
    for (int b = 0; b < 256; ++b) {
      const std::string token = gpt2::bytes::utf8Encode(gpt2::bytes::byteToCodePoint()[b]);
      std::string escaped;
      for (char c : token) {
        if (c == '"' || c == '\\') escaped += '\\';
        escaped += c;
      }
      vocab += (b ? ",\"" : "\"") + escaped + "\":" + std::to_string(b);
    }
    vocab += ",\"<|endoftext|>\":256}";
    auto t = gpt2::Tokenizer::fromContents(vocab, "#version: 0.2\n");
    if (!t.ok()) osprey_fuzz::scratchFailure("the byte tokenizer: " + t.error().message);
    return std::move(*t);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Setup setup;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string file;
  if (osprey_fuzz::startsWith(input, kMagic)) {
    file = input;
  } else {
    appendInt(file, 20240520);
    appendInt(file, 1);
    appendInt(file, static_cast<std::uint32_t>(input.size() / 2));
    file.resize(osprey::io::kLlmcShardHeaderBytes, '\0');
    file += input;
  }
  osprey_fuzz::writeBytes(setup.shard, file);
  const std::string path = setup.shard.string();

  require(osprey::io::looksLikeLlmcShard(path), "a file that begins with the magic looks like a shard");
  for (const osprey::Index vocab : kVocabs) {
    const auto expected = expectedTokens(file, vocab);
    const auto read = osprey::io::readLlmcShard(path, vocab);
    require(read.ok() == expected.has_value(), "the reader accepts exactly what the layout allows");
    if (!read.ok()) {
      require(read.error().message.find(path) != std::string::npos, "a refusal names the file");
    } else {
      require(*read == *expected, "the shard's tokens, in order");
    }

    // As training reads it: the file itself, and a pattern matching it alone.
    const gpt2::train::DataSources sources{path, std::nullopt, std::nullopt, vocab};
    const auto one = gpt2::train::readTokenFile(path, sources, setup.tokenizer, setup.dir);
    const std::string pattern = (setup.dir / "shard-*.bin").string();
    const auto many = gpt2::train::readTokenFile(pattern, sources, setup.tokenizer, setup.dir);
    require(one.ok() == read.ok() && many.ok() == read.ok(), "training reads what the shard reader reads");
    if (!read.ok()) {
      require(one.error().message.find(path) != std::string::npos, "training's refusal names the file");
      require(many.error().message.find(path) != std::string::npos, "a pattern's refusal names the file");
      continue;
    }
    require(one->tokens == *read && many->tokens == *read, "training trains on the shard's tokens");
    const std::string digest = gpt2::data::sha256Hex(file);
    require(one->sha256 == digest, "a shard's digest is its bytes'");
    require(many->sha256 == gpt2::data::sha256Hex(digest), "a pattern's digest is over its shards' digests");

    // Written back: llm.c's layout, the same bytes but for the header's unused ints (once: a shard
    // the smaller vocabulary accepts has the same tokens under the larger, and each atomic write
    // waits for the disk twice).
    if (vocab != kVocabs[0]) continue;
    require(osprey::io::writeLlmcShard(setup.copy.string(), *read).ok(), "an accepted shard can be written");
    std::string canonical = file;
    std::fill(canonical.begin() + 12, canonical.begin() + osprey::io::kLlmcShardHeaderBytes, '\0');
    require(readBack(setup.copy) == canonical, "written back as the same bytes");
  }
  return 0;
}
