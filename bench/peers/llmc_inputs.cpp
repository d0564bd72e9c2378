// The files llm.c's CPU reference train_gpt2.c reads, written from Osprey's own initialiser and
// tokenizer, so that the two programs of the side-by-side benchmark (llmc_cpu.sh) train the same
// model on the same tokens.
//
//   osprey_llmc_inputs --tokenizer DIR --text FILE --out DIR [--seed 1337] [--val-fraction 0.1]
//
// Under DIR (train_gpt2.c opens these relative to its working directory):
//   gpt2_124M.bin                                        initialWeights(kGpt2_124M, seed), float32
//   gpt2_tokenizer.bin                                   the token table (only for llm.c's samples)
//   dev/data/tinyshakespeare/tiny_shakespeare_train.bin  first 1 - f of the text, at a line break
//   dev/data/tinyshakespeare/tiny_shakespeare_val.bin    the rest
//
// Formats, as llm.c reads them (train_gpt2.c gpt2_build_from_checkpoint, llmc/dataloader.h,
// llmc/tokenizer.h) and writes them (train_gpt2.py, dev/data/data_common.py write_datafile):
//   checkpoint: 256 int32 {20240326, 3, maxT, V, L, NH, C, Vp, 0...}, then float32 parameters
//               (osprey::io::writeLlmcCheckpoint).
//   token shard: 256 int32 {20240520, 1, token count, 0...}, then the tokens as uint16.
//   tokenizer:  256 uint32 {20240328, 2, V, eot, 0...}, then per token a uint8 length and bytes.
// Each shard starts with <|endoftext|>, as dev/data/tinyshakespeare.py starts each document.
// All integers little-endian (what llm.c's freads assume on x86 and ARM).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpt2/model/init.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/model/weights.hpp"
#include "osprey/io/llmc_checkpoint.hpp"

namespace {

namespace fs = std::filesystem;
using osprey::Error;
using osprey::Result;

constexpr std::int32_t kShardMagic = 20240520;
constexpr std::int32_t kShardVersion = 1;
constexpr std::uint32_t kTokenizerMagic = 20240328;
constexpr std::uint32_t kTokenizerVersion = 2;  // version 2 carries the eot id in the header
constexpr std::size_t kHeaderInts = 256;

void putU32(std::string& bytes, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>(v >> (8 * k)));
}

Result<void> writeBytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Error{fmt::format("{}: cannot write", path.string())};
  return osprey::success();
}

Result<void> writeShard(const fs::path& path, const std::vector<int>& tokens) {
  // llm.c's loader needs at least B·T + 1 tokens; the count is an int32 in the header.
  if (tokens.size() < 2 || tokens.size() >= (std::size_t{1} << 31)) {
    return Error{fmt::format("{}: {} tokens cannot make a shard", path.string(), tokens.size())};
  }
  std::string bytes;
  bytes.reserve(kHeaderInts * 4 + tokens.size() * 2);
  putU32(bytes, static_cast<std::uint32_t>(kShardMagic));
  putU32(bytes, static_cast<std::uint32_t>(kShardVersion));
  putU32(bytes, static_cast<std::uint32_t>(tokens.size()));
  bytes.resize(kHeaderInts * 4, '\0');
  for (int t : tokens) {
    if (t < 0 || t > 0xFFFF) return Error{fmt::format("{}: token {} does not fit uint16", path.string(), t)};
    bytes.push_back(static_cast<char>(t & 0xFF));
    bytes.push_back(static_cast<char>(t >> 8));
  }
  OSPREY_CHECK(writeBytes(path, bytes));
  std::cout << fmt::format("{}: {} tokens\n", path.string(), tokens.size());
  return osprey::success();
}

Result<void> writeTokenizer(const fs::path& path, const gpt2::Tokenizer& tok) {
  std::string bytes;
  putU32(bytes, kTokenizerMagic);
  putU32(bytes, kTokenizerVersion);
  putU32(bytes, static_cast<std::uint32_t>(tok.vocabSize()));
  putU32(bytes, static_cast<std::uint32_t>(tok.eotToken()));
  bytes.resize(kHeaderInts * 4, '\0');
  for (int id = 0; id < tok.vocabSize(); ++id) {
    const std::string text = OSPREY_TRY(tok.tokenText(id));
    // llm.c asserts every length is 1..255.
    if (text.empty() || text.size() > 255) return Error{fmt::format("token {} has {} bytes", id, text.size())};
    bytes.push_back(static_cast<char>(text.size()));
    bytes += text;
  }
  return writeBytes(path, bytes);
}

Result<void> writeCheckpoint(const fs::path& path, std::uint64_t seed) {
  const gpt2::Config c = gpt2::kGpt2_124M;
  gpt2::HostWeights w = gpt2::initialWeights(c, seed);
  const auto specs = gpt2::parameterSpecs(c);
  std::map<std::string, osprey::io::TensorData> tensors;
  // Moved, not copied: the float64 weights are 1 GB.
  for (std::size_t i = 0; i < specs.size(); ++i)
    tensors[specs[i].name] = osprey::io::TensorData{specs[i].shape, std::move(w.tensors[i].values)};
  // llm.c pads the vocabulary to a multiple of 128 (50304 for GPT-2), as train_gpt2.py writes it.
  const osprey::Index Vp = (c.V + 127) / 128 * 128;
  const osprey::io::LlmcConfig lc{c.maxT, c.V, c.L, c.NH, c.C, Vp};
  fs::create_directories(path.parent_path());
  OSPREY_CHECK(osprey::io::writeLlmcCheckpoint(path.string(), lc, tensors, osprey::io::DType::F32));
  std::cout << fmt::format("{}: GPT-2 124M, seed {}, {} parameters (Vp = {})\n", path.string(), seed,
                           osprey::io::llmcParameterCount(lc), Vp);
  return osprey::success();
}

Result<void> run(const fs::path& tokenizerDir, const fs::path& textPath, const fs::path& out, std::uint64_t seed,
                 double valFraction) {
  std::ifstream in(textPath, std::ios::binary);
  if (!in) return Error{fmt::format("{}: cannot read", textPath.string())};
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  // The split falls at a line break, so no word (or UTF-8 character) is cut in two.
  std::size_t cut = static_cast<std::size_t>(static_cast<double>(text.size()) * (1.0 - valFraction));
  const std::size_t lineEnd = text.rfind('\n', cut);
  if (lineEnd != std::string::npos) cut = lineEnd + 1;
  if (cut == 0 || cut >= text.size()) return Error{fmt::format("{}: too short to split", textPath.string())};

  const gpt2::Tokenizer tok = OSPREY_TRY(gpt2::Tokenizer::load(tokenizerDir));
  auto shard = [&](std::string_view part) -> Result<std::vector<int>> {
    std::vector<int> ids{tok.eotToken()};
    const std::vector<int> body = OSPREY_TRY(tok.encode(part));
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  };
  const fs::path data = out / "dev" / "data" / "tinyshakespeare";
  OSPREY_CHECK(writeShard(data / "tiny_shakespeare_train.bin", OSPREY_TRY(shard(std::string_view(text).substr(0, cut)))));
  OSPREY_CHECK(writeShard(data / "tiny_shakespeare_val.bin", OSPREY_TRY(shard(std::string_view(text).substr(cut)))));
  OSPREY_CHECK(writeTokenizer(out / "gpt2_tokenizer.bin", tok));
  return writeCheckpoint(out / "gpt2_124M.bin", seed);
}

}  // namespace

int main(int argc, char** argv) {
  fs::path tokenizerDir, text, out;
  std::uint64_t seed = gpt2::kDefaultSeed;
  double valFraction = 0.1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--tokenizer" && hasValue) tokenizerDir = argv[++i];
    else if (a == "--text" && hasValue) text = argv[++i];
    else if (a == "--out" && hasValue) out = argv[++i];
    else if (a == "--seed" && hasValue) seed = std::stoull(argv[++i]);
    else if (a == "--val-fraction" && hasValue) valFraction = std::stod(argv[++i]);
    else {
      tokenizerDir.clear();
      break;
    }
  }
  if (tokenizerDir.empty() || text.empty() || out.empty() || !(valFraction > 0.0 && valFraction < 1.0)) {
    std::cerr << "usage: osprey_llmc_inputs --tokenizer DIR --text FILE --out DIR [--seed N] [--val-fraction F]\n"
                 "  DIR holds vocab.json + merges.txt (or encoder.json + vocab.bpe)\n";
    return 2;
  }
  auto r = run(tokenizerDir, text, out, seed, valFraction);
  if (!r.ok()) {
    std::cerr << "osprey_llmc_inputs: " << r.error().message << "\n";
    return 1;
  }
  return 0;
}
