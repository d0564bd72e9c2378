// Saving a Hugging Face GPT-2 directory (see checkpoint_save.hpp).
#include "gpt2/checkpoint/save.hpp"

#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "gpt2/checkpoint/config.hpp"
#include "osprey/io/atomic_file.hpp"
#include "osprey/io/safetensors_writer.hpp"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;

osprey::Result<std::string> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return osprey::Error{fmt::format("{}: cannot open (missing or unreadable)", path.string())};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return osprey::Error{fmt::format("{}: read failed", path.string())};
  return text.str();
}

// The first of `names` that exists in dir.
std::optional<fs::path> firstExisting(const fs::path& dir, std::initializer_list<const char*> names) {
  std::error_code ec;
  for (const char* name : names)
    if (fs::is_regular_file(dir / name, ec)) return dir / name;
  return std::nullopt;
}

// Copies the tokenizer pair under the Hugging Face names.
osprey::Result<void> copyTokenizer(const fs::path& from, const fs::path& dir) {
  const auto vocab = firstExisting(from, {"vocab.json", "encoder.json"});
  const auto merges = firstExisting(from, {"merges.txt", "vocab.bpe"});
  if (!vocab || !merges)
    return osprey::Error{fmt::format("{}: no tokenizer files (vocab.json + merges.txt, or "
                                     "encoder.json + vocab.bpe) to copy", from.string())};
  // Reading then writing (not fs::copy) keeps the write atomic, and lets DIR be the source.
  const std::string vocabText = OSPREY_TRY(readFile(*vocab));
  const std::string mergesText = OSPREY_TRY(readFile(*merges));
  OSPREY_CHECK(osprey::io::writeFileAtomic((dir / "vocab.json").string(), vocabText));
  OSPREY_CHECK(osprey::io::writeFileAtomic((dir / "merges.txt").string(), mergesText));
  return {};
}

}  // namespace

osprey::Result<void> saveHfDirectory(const fs::path& dir, const HostWeights& weights,
                                     osprey::io::DType dtype, const fs::path& tokenizerDir) {
  OSPREY_CHECK(checkShapes(weights, "weights to save"));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return osprey::Error{fmt::format("{}: cannot create the directory: {}", dir.string(),
                                     osprey::io::cannotCreateDirectories(dir.string(), ec.value()))};
  if (!fs::is_directory(dir, ec))
    return osprey::Error{fmt::format("{}: cannot create the directory (a file of that name exists)", dir.string())};

  const auto specs = parameterSpecs(weights.config);
  std::vector<osprey::io::TensorToSave> tensors;
  tensors.reserve(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i)
    tensors.push_back({specs[i].name, specs[i].shape, std::span<const Scalar>(weights.tensors[i].values)});
  OSPREY_CHECK(osprey::io::writeSafetensors((dir / "model.safetensors").string(), tensors, dtype));
  OSPREY_CHECK(copyTokenizer(tokenizerDir, dir));
  return osprey::io::writeFileAtomic((dir / "config.json").string(), hfConfigText(weights.config));
}

}  // namespace gpt2
