// Item: duplicate JSON keys are silent nonsense (nlohmann keeps the last, other readers the
// first). Every JSON file the command line reads goes through the one checked reader
// (osprey/io/json_text.hpp), so a key given twice, at the top or nested, is an error naming the
// file and the key: config.json, vocab.json, model.safetensors' header and trainer_state.json;
// the token cache (the run's own file, rebuilt when damaged) is rebuilt and the run says why.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpt2/checkpoint/save.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/temp_dir.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/data_cache.hpp"
#include "gpt2/train/data_sha256.hpp"
#include "hostile_helpers.hpp"

namespace fs = std::filesystem;
using gpt2::testing::ScopedEnv;
using gpt2::testing::TempDir;
using namespace osprey::testing::train;

namespace {

// `text` with `insertion` right after its first '{' (a key ahead of the file's own).
std::string afterFirstBrace(std::string text, const std::string& insertion) {
  const std::size_t brace = text.find('{');
  EXPECT_NE(brace, std::string::npos);
  text.insert(brace + 1, insertion);
  return text;
}

std::uint64_t readU64(const std::string& bytes, std::size_t at) {
  std::uint64_t v = 0;
  for (int k = 7; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(k)]);
  return v;
}

std::string u64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[static_cast<std::size_t>(k)] = static_cast<char>(v >> (8 * k));
  return out;
}

// A file laid out as [prefix][8-byte length][JSON header][rest] (safetensors: no prefix; the
// token cache: its 8-byte magic) with `insertion` put into the header, the length fixed.
void insertIntoHeader(const fs::path& file, std::size_t prefix, const std::string& insertion) {
  const std::string bytes = readText(file);
  const std::uint64_t length = readU64(bytes, prefix);
  const std::string header = afterFirstBrace(bytes.substr(prefix + 8, length), insertion);
  writeText(file, bytes.substr(0, prefix) + u64(header.size()) + header + bytes.substr(prefix + 8 + length));
}

// A tiny model directory (config.json, model.safetensors, vocab.json, merges.txt).
fs::path tinyModel(const TempDir& dir, const std::string& name) {
  const fs::path model = dir / name;
  auto saved = gpt2::saveHfDirectory(model, gpt2::initialWeights(gpt2::kGpt2Tiny, gpt2::kDefaultSeed),
                                     osprey::io::DType::F64, gpt2::testing::tokenizerDir());
  EXPECT_TRUE(saved.ok()) << saved.error().message;
  return model;
}

CliRun generateWith(const fs::path& model) {
  return runOsprey({"generate", "--model", model.string(), "--prompt", "Hello", "--tokens", "2"});
}

struct Case {
  const char* what;
  const char* file;       // in the model directory
  std::string insertion;  // put right after the file's first '{'
  std::string expected;   // after "<dir>/<file>: "
};

}  // namespace

// config.json, vocab.json and model.safetensors, each with a key given twice (top level and
// nested), and a number out of range named by its key: generate refuses each, naming both.
TEST(HostileJson, EveryFileOfAModelDirectoryRefusesAKeyGivenTwice) {
  TempDir dir;
  const std::string twice = "is given twice";
  const std::vector<Case> cases{
      {"config: top level", "config.json", R"("n_layer": 1, )", "key `n_layer` " + twice},
      {"config: the same value twice", "config.json", R"("n_embd": 64, )", "key `n_embd` " + twice},
      {"config: nested", "config.json",
       R"("task_specific_params": {"text-generation": {"max_length": 50, "max_length": 9}}, )",
       "key `max_length` " + twice + " in `task_specific_params.text-generation`"},
      {"config: an escaped twin", "config.json", R"("n_l\u0061yer": 1, )", "key `n_layer` " + twice},
      {"config: a number beyond double", "config.json", R"("initializer_range": 1e400, )",
       "`initializer_range`: a number is out of range (number overflow parsing '1e400')"},
      {"vocab: a token twice", "vocab.json", "\"\xC4\xA0the\": 262, ", "key `\xC4\xA0the` " + twice},
      {"vocab: a byte symbol twice, other id", "vocab.json", R"("!": 7, )", "key `!` " + twice},
      {"safetensors: a tensor twice", "model.safetensors",
       R"("wte.weight": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}, )", "header: key `wte.weight` " + twice},
      {"safetensors: a field twice", "model.safetensors",
       R"("zz": {"dtype": "F64", "shape": [0], "dtype": "F64", "data_offsets": [0, 0]}, )",
       "header: key `dtype` " + twice + " in `zz`"},
      {"safetensors: metadata twice", "model.safetensors", R"("__metadata__": {"format": "pt", "format": "pt"}, )",
       "header: key `format` " + twice + " in `__metadata__`"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const fs::path model = tinyModel(dir, "m");
    const fs::path file = model / c.file;
    if (std::string(c.file) == "model.safetensors") insertIntoHeader(file, 0, c.insertion);
    else writeText(file, afterFirstBrace(readText(file), c.insertion));
    const CliRun r = generateWith(model);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(file.string() + ": " + c.expected), std::string::npos) << r.err;
    // The same directory through $OSPREY_GPT2 says where it came from.
    ScopedEnv env("OSPREY_GPT2", model.string());
    const CliRun viaEnv = runOsprey({"generate", "--prompt", "Hello", "--tokens", "2"});
    EXPECT_EQ(viaEnv.status, 1);
    EXPECT_NE(viaEnv.err.find(c.expected), std::string::npos) << viaEnv.err;
    fs::remove_all(model);
  }
}

// trainer_state.json: a key given twice at the top or inside an object stops the resume; the
// checkpoint is left as it was.
TEST(HostileJson, ATrainerStateWithAKeyGivenTwiceCannotBeResumed) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  ASSERT_EQ(saveOneStep(data, run).status, 0);
  const fs::path manifest = trainerStateOf(run);
  const std::string good = readText(manifest);
  struct Edit {
    const char* what;
    const char* after;      // the text the insertion follows
    const char* insertion;
    const char* expected;   // after "<manifest>: "
  };
  const std::vector<Edit> edits{
      {"step twice", "{", R"("step": 900, )", "key `step` is given twice"},
      {"lr twice", R"("adamw": {)", R"("lr": 0.5, )", "key `lr` is given twice in `adamw`"},
      {"data path twice", R"("data": {)", R"("path": "x", )", "key `path` is given twice in `data`"},
      // Text that does not parse says so before any repeated key.
      {"a number beyond double, and its key again", R"("adamw": {)", R"("eps": -1e999, )",
       "`adamw.eps`: a number is out of range (number overflow parsing '-1e999')"},
      {"a number beyond double, once", "{", R"("extra": 1e400, )", "`extra`: a number is out of range"},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.what);
    std::string text = good;
    const std::size_t at = text.find(e.after);
    ASSERT_NE(at, std::string::npos);
    text.insert(at + std::string(e.after).size(), e.insertion);
    writeText(manifest, text);
    const auto before = snapshot(gpt2::train::checkpointDir(run));
    const CliRun r = tinyTrain(data, {"--resume", run.string(), "--steps", "2", "--save", run.string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find(manifest.string() + ": " + e.expected), std::string::npos) << r.err;
    EXPECT_EQ(snapshot(gpt2::train::checkpointDir(run)), before);
  }
  writeText(manifest, good);
  EXPECT_EQ(tinyTrain(data, {"--resume", run.string(), "--steps", "2", "--save", run.string()}).status, 0);
}

// The token cache is the run's own file, and a damaged one is rebuilt, never read: a header with
// a key given twice is damaged, and the run says so, naming the file and the key.
TEST(HostileJson, ATokenCacheWithAKeyGivenTwiceIsRebuiltAndSaidSo) {
  TempDir dir;
  ScopedEnv cacheHome("XDG_CACHE_HOME", (dir / "xdg-cache").string());
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  ASSERT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "1"}).status, 0);
  const fs::path cache = gpt2::data::cachePathIn(dir / "xdg-cache" / "osprey", *gpt2::data::sha256File(data));
  ASSERT_TRUE(fs::exists(cache));
  insertIntoHeader(cache, 8, R"("count": 1, )");

  const CliRun rebuilt = tinyTrain(data, {"--preset", "tiny", "--steps", "1"});
  EXPECT_EQ(rebuilt.status, 0) << rebuilt.err;
  EXPECT_NE(rebuilt.err.find("tokenised and cached in " + cache.string()), std::string::npos) << rebuilt.err;
  EXPECT_NE(rebuilt.err.find("the cache there was damaged and not read: " + cache.string() +
                             ": key `count` is given twice"),
            std::string::npos)
      << rebuilt.err;
  const CliRun reused = tinyTrain(data, {"--preset", "tiny", "--steps", "1"});
  EXPECT_EQ(reused.status, 0) << reused.err;
  EXPECT_NE(reused.err.find("tokens from the cache " + cache.string()), std::string::npos) << reused.err;
  EXPECT_EQ(reused.err.find("damaged"), std::string::npos) << reused.err;
}
