// GPT-2 checkpoints: Hugging Face config.json, model directories (save then load), prefixed and
// tied names, llm.c .bin files, the checkpoint search order, and every refusal naming the file
// and the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "files.hpp"
#include "gpt2/checkpoint/config.hpp"
#include "gpt2/checkpoint/find.hpp"
#include "gpt2/checkpoint/load.hpp"
#include "gpt2/checkpoint/save.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/temp_dir.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "osprey/io/llmc_checkpoint.hpp"
#include "osprey/io/safetensors_writer.hpp"

namespace gpt2 {
namespace {

using testing::ScopedEnv;
using testing::TempDir;
namespace fs = std::filesystem;

const HostWeights& tiny() {
  static const HostWeights w = initialWeights(kGpt2Tiny, kDefaultSeed);
  return w;
}

bool sameBits(const HostWeights& a, const HostWeights& b) {
  if (a.config != b.config || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i].values;
    const auto& y = b.tensors[i].values;
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(Scalar)) != 0) return false;
  }
  return true;
}

using osprey::testing::writeText;

// A model directory with tiny's config and the given tensors (names as given), F64.
void writeModelDir(const fs::path& dir, const std::vector<osprey::io::TensorToSave>& tensors) {
  fs::create_directories(dir);
  writeText(dir / "config.json", hfConfigText(kGpt2Tiny));
  auto r = osprey::io::writeSafetensors((dir / "model.safetensors").string(), tensors, osprey::io::DType::F64);
  ASSERT_TRUE(r.ok()) << r.error().message;
}

// tiny's tensors under `prefix` + their names.
std::vector<osprey::io::TensorToSave> tinyTensors(const std::string& prefix = "") {
  std::vector<osprey::io::TensorToSave> out;
  const auto specs = parameterSpecs(kGpt2Tiny);
  for (std::size_t i = 0; i < specs.size(); ++i)
    out.push_back({prefix + specs[i].name, specs[i].shape, std::span<const Scalar>(tiny().tensors[i].values)});
  return out;
}

void expectError(const osprey::Result<LoadedCheckpoint>& r, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.ok());
  for (const auto& part : parts) EXPECT_NE(r.error().message.find(part), std::string::npos) << r.error().message;
}

// --- config.json ----------------------------------------------------------------------------

TEST(Gpt2Config, WrittenConfigReadsBack) {
  auto c = parseHfConfig(hfConfigText(kGpt2_124M), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, kGpt2_124M);
  const std::string text = hfConfigText(kGpt2Tiny);
  for (const char* field : {"\"architectures\"", "\"GPT2LMHeadModel\"", "\"model_type\": \"gpt2\"",
                            "\"activation_function\": \"gelu_new\"", "\"layer_norm_epsilon\": 1e-05",
                            "\"n_positions\": 128", "\"n_ctx\": 128", "\"vocab_size\": 50257",
                            "\"bos_token_id\": 50256", "\"eos_token_id\": 50256",
                            "\"tie_word_embeddings\": true"})
    EXPECT_NE(text.find(field), std::string::npos) << field;
}

TEST(Gpt2Config, OpenAIsOwnConfigReads) {
  // openai-community/gpt2's config.json (abridged to the fields that matter).
  const char* json = R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
    "n_layer": 12, "n_positions": 1024, "vocab_size": 50257, "task_specific_params": {}})";
  auto c = parseHfConfig(json, "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, kGpt2_124M);
  auto old = parseHfConfig(R"({"n_ctx": 128, "n_embd": 64, "n_head": 2, "n_layer": 2, "vocab_size": 50257})", "c");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(*old, kGpt2Tiny);
}

TEST(Gpt2Config, RefusalsNameTheFileAndField) {
  const std::string base = R"("n_positions": 128, "n_embd": 64, "n_head": 2, "n_layer": 2, "vocab_size": 50257)";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"{" + base + R"(, "layer_norm_epsilon": 1e-6})", "layer_norm_epsilon"},
      {"{" + base + R"(, "activation_function": "relu"})", "activation_function"},
      {"{" + base + R"(, "n_inner": 100})", "n_inner"},
      {"{" + base + R"(, "model_type": "llama"})", "model_type"},
      {"{" + base + R"(, "tie_word_embeddings": false})", "tie_word_embeddings"},
      {"{" + base + R"(, "scale_attn_by_inverse_layer_idx": true})", "scale_attn_by_inverse_layer_idx"},
      {R"({"n_positions": 128, "n_embd": 64, "n_head": 2, "vocab_size": 50257})", "n_layer"},
      {R"({"n_positions": 128, "n_embd": 64, "n_head": 3, "n_layer": 2, "vocab_size": 50257})", "n_head"},
      {R"({"n_positions": "128", "n_embd": 64, "n_head": 2, "n_layer": 2, "vocab_size": 50257})", "n_positions"},
      {"{not json", "not valid JSON"},
      {"{" + base + R"(, "layer_norm_epsilon": 1e400})", "out of range"},
      {"{" + base + R"(, "n_layer": 1e400})", "out of range"},
      {"{" + base + R"(, "x": -1e999999})", "out of range"},
      {"[1, 2]", "not a JSON object"}};
  for (const auto& [json, field] : cases) {
    auto c = parseHfConfig(json, "dir/config.json");
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_NE(c.error().message.find("dir/config.json"), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find(field), std::string::npos) << c.error().message;
  }
}

// --- saving and loading model directories ---------------------------------------------------

TEST(Gpt2Checkpoint, SavedF64DirectoryLoadsBackBitForBit) {
  TempDir tmp;
  const fs::path dir = tmp / "model";
  auto saved = saveHfDirectory(dir, tiny(), osprey::io::DType::F64, testing::tokenizerDir());
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  for (const char* file : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
    EXPECT_TRUE(fs::is_regular_file(dir / file)) << file;
  auto loaded = loadCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_TRUE(sameBits(loaded->weights, tiny()));
  EXPECT_EQ(loaded->directory, dir);
  EXPECT_TRUE(hasTokenizerFiles(dir));
  // Stored without the `transformer.` prefix, as openai-community/gpt2's file is.
  auto file = osprey::io::SafetensorsFile::open((dir / "model.safetensors").string());
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->contains("h.0.attn.c_attn.weight"));
  EXPECT_FALSE(file->contains("lm_head.weight"));
  EXPECT_EQ(file->metadata().at("format"), "pt");
}

// A config that describes fewer blocks than the weights hold: the extra block would be dropped
// without a word (and a resumed run would save a smaller model), so loading is an error naming it.
TEST(Gpt2Checkpoint, TensorsTheConfigDoesNotDescribeAreAnError) {
  TempDir tmp;
  const fs::path dir = tmp / "model";
  ASSERT_TRUE(saveHfDirectory(dir, tiny(), osprey::io::DType::F64, testing::tokenizerDir()).ok());
  nlohmann::json config;
  {
    std::ifstream in(dir / "config.json");
    config = nlohmann::json::parse(in);
  }
  ASSERT_EQ(config.at("n_layer").get<int>(), 2);
  config["n_layer"] = 1;
  std::ofstream(dir / "config.json") << config.dump(2);
  auto loaded = loadCheckpoint(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find("tensor `h.1."), std::string::npos) << loaded.error().message;
  EXPECT_NE(loaded.error().message.find("is not part of the model its config describes (1 blocks"),
            std::string::npos)
      << loaded.error().message;
}

TEST(Gpt2Checkpoint, SavedF32DirectoryLoadsTheFloat32Values) {
  TempDir tmp;
  auto saved = saveHfDirectory(tmp.path(), tiny(), osprey::io::DType::F32, testing::tokenizerDir());
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  auto loaded = loadCheckpoint(tmp.path());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  for (std::size_t i = 0; i < tiny().tensors.size(); ++i)
    for (std::size_t j = 0; j < tiny().tensors[i].values.size(); j += 97)
      ASSERT_EQ(loaded->weights.tensors[i].values[j],
                static_cast<double>(static_cast<float>(tiny().tensors[i].values[j])));
}

TEST(Gpt2Checkpoint, PrefixedNamesAndATiedHeadLoad) {
  TempDir tmp;
  auto tensors = tinyTensors("transformer.");
  tensors.push_back({"lm_head.weight", {kGpt2Tiny.V, kGpt2Tiny.C}, std::span<const Scalar>(tiny().wte().values)});
  writeModelDir(tmp.path(), tensors);
  auto loaded = loadCheckpoint(tmp.path());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_TRUE(sameBits(loaded->weights, tiny()));
}

TEST(Gpt2Checkpoint, AnUntiedHeadIsRefused) {
  TempDir tmp;
  std::vector<Scalar> other = tiny().wte().values;
  other[12345] += 1.0;
  auto tensors = tinyTensors();
  tensors.push_back({"lm_head.weight", {kGpt2Tiny.V, kGpt2Tiny.C}, std::span<const Scalar>(other)});
  writeModelDir(tmp.path(), tensors);
  expectError(loadCheckpoint(tmp.path()), {"model.safetensors", "lm_head.weight", "differs from wte.weight"});
}

TEST(Gpt2Checkpoint, AMissingTensorIsNamed) {
  TempDir tmp;
  auto tensors = tinyTensors();
  tensors.erase(tensors.begin() + 9);  // h.0.ln_2.bias
  writeModelDir(tmp.path(), tensors);
  expectError(loadCheckpoint(tmp.path()), {"model.safetensors", "`h.0.ln_2.bias` is missing"});
}

TEST(Gpt2Checkpoint, AWrongShapeIsNamed) {
  TempDir tmp;
  auto tensors = tinyTensors();
  tensors[4].shape = {3 * 64, 64};  // h.0.attn.c_attn.weight transposed (nn.Linear layout)
  writeModelDir(tmp.path(), tensors);
  expectError(loadCheckpoint(tmp.path()),
              {"model.safetensors", "h.0.attn.c_attn.weight", "shape (192, 64), expected (64, 192)"});
}

TEST(Gpt2Checkpoint, BothSpellingsOfANameAreAmbiguous) {
  TempDir tmp;
  auto tensors = tinyTensors();
  tensors.push_back({"transformer.wpe.weight", {kGpt2Tiny.maxT, kGpt2Tiny.C},
                     std::span<const Scalar>(tiny().wpe().values)});
  writeModelDir(tmp.path(), tensors);
  expectError(loadCheckpoint(tmp.path()), {"wpe.weight", "transformer.wpe.weight"});
}

TEST(Gpt2Checkpoint, IncompleteDirectoriesAndPathsAreRefused) {
  TempDir tmp;
  expectError(loadCheckpoint(tmp.path()), {"no config.json"});
  writeText(tmp / "config.json", hfConfigText(kGpt2Tiny));
  expectError(loadCheckpoint(tmp.path()), {"no model.safetensors"});
  expectError(loadCheckpoint(tmp / "absent"), {"absent", "no such file"});
  writeModelDir(tmp / "m", tinyTensors());
  expectError(loadCheckpoint(tmp / "m" / "model.safetensors"), {"give the model directory"});
  writeText(tmp / "m" / "config.json", R"({"n_positions": 64, "n_embd": 64, "n_head": 2, "n_layer": 2, "vocab_size": 50257})");
  expectError(loadCheckpoint(tmp / "m"), {"wpe.weight", "shape (128, 64), expected (64, 64)"});
}

TEST(Gpt2Checkpoint, LlmcBinLoadsAsHuggingFaceTensors) {
  TempDir tmp;
  const osprey::io::LlmcConfig config{128, 50257, 2, 2, 64, 50304};
  std::map<std::string, osprey::io::TensorData> tensors;
  const auto specs = parameterSpecs(kGpt2Tiny);
  for (std::size_t i = 0; i < specs.size(); ++i)
    tensors[specs[i].name] = osprey::io::TensorData{specs[i].shape, tiny().tensors[i].values};
  const fs::path bin = tmp / "gpt2_tiny.bin";
  auto written = osprey::io::writeLlmcCheckpoint(bin.string(), config, tensors, osprey::io::DType::F32);
  ASSERT_TRUE(written.ok()) << written.error().message;
  auto loaded = loadCheckpoint(bin);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->weights.config, kGpt2Tiny);
  EXPECT_FALSE(loaded->directory.has_value());
  for (std::size_t i = 0; i < specs.size(); ++i)
    for (std::size_t j = 0; j < tiny().tensors[i].values.size(); j += 89)
      ASSERT_EQ(loaded->weights.tensors[i].values[j],
                static_cast<double>(static_cast<float>(tiny().tensors[i].values[j])))
          << specs[i].name;
}

// --- the search order -----------------------------------------------------------------------

TEST(Gpt2ChooseModel, ModelThenPresetThenEnvironmentThenCache) {
  TempDir tmp;
  ASSERT_TRUE(saveHfDirectory(tmp / "env", tiny(), osprey::io::DType::F64, testing::tokenizerDir()).ok());
  const fs::path snapshot = tmp / "hub" / "models--openai-community--gpt2" / "snapshots" / "0123abc";
  ASSERT_TRUE(saveHfDirectory(snapshot, tiny(), osprey::io::DType::F32, testing::tokenizerDir()).ok());
  ScopedEnv hub("HF_HUB_CACHE", (tmp / "hub").string());

  {
    ScopedEnv env("OSPREY_GPT2", (tmp / "env").string());
    auto chosen = chooseModel(ModelRequest{});
    ASSERT_TRUE(chosen.ok()) << chosen.error().message;
    EXPECT_EQ(chosen->directory, tmp / "env");
    EXPECT_EQ(chosen->label, "tiny");
    EXPECT_TRUE(chosen->notice.empty());
    EXPECT_TRUE(sameBits(chosen->weights, tiny()));

    auto preset = chooseModel(ModelRequest{std::nullopt, "tiny", 7});
    ASSERT_TRUE(preset.ok());
    EXPECT_NE(preset->notice.find("seed 7"), std::string::npos) << preset->notice;
    EXPECT_TRUE(sameBits(preset->weights, initialWeights(kGpt2Tiny, 7)));

    auto both = chooseModel(ModelRequest{(tmp / "env").string(), "tiny", 1});
    ASSERT_FALSE(both.ok());
    EXPECT_NE(both.error().message.find("not both"), std::string::npos);
  }
  {
    ScopedEnv env("OSPREY_GPT2", std::nullopt);
    auto cached = chooseModel(ModelRequest{});
    ASSERT_TRUE(cached.ok()) << cached.error().message;
    EXPECT_EQ(cached->directory, snapshot);
    EXPECT_TRUE(cached->notice.empty());
  }
  {
    ScopedEnv env("OSPREY_GPT2", (tmp / "nowhere").string());
    auto bad = chooseModel(ModelRequest{});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("$OSPREY_GPT2"), std::string::npos) << bad.error().message;
  }
}

// --model takes a Hugging Face GPT-2 name where no such path exists: that model's snapshot in the
// cache, or an error saying where it looked and how to get it (never another size).
TEST(Gpt2ChooseModel, AHuggingFaceNameIsItsCacheSnapshot) {
  TempDir tmp;
  const fs::path snapshot = tmp / "hub" / "models--openai-community--gpt2-medium" / "snapshots" / "4567def";
  ASSERT_TRUE(saveHfDirectory(snapshot, tiny(), osprey::io::DType::F32, testing::tokenizerDir()).ok());
  ScopedEnv hub("HF_HUB_CACHE", (tmp / "hub").string());
  for (const char* name : {"gpt2-medium", "openai-community/gpt2-medium"}) {
    SCOPED_TRACE(name);
    auto chosen = chooseModel(ModelRequest{name, std::nullopt, 1});
    ASSERT_TRUE(chosen.ok()) << chosen.error().message;
    EXPECT_EQ(chosen->directory, snapshot);
    EXPECT_TRUE(chosen->notice.empty());
  }
  auto missing = chooseModel(ModelRequest{"gpt2-large", std::nullopt, 1});
  ASSERT_FALSE(missing.ok());
  for (const char* part : {"--model gpt2-large: no such file or directory", "openai-community/gpt2-large",
                           "models--openai-community--gpt2-large", "scripts/download-gpt2.sh DIR gpt2-large",
                           "--preset 774M"})
    EXPECT_NE(missing.error().message.find(part), std::string::npos) << missing.error().message;
  // A name that is no GPT-2 stays a path, and its error names it as one.
  auto path = chooseModel(ModelRequest{"gpt2-huge", std::nullopt, 1});
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.error().message.find("gpt2-huge"), std::string::npos) << path.error().message;
  EXPECT_EQ(path.error().message.find("cache snapshot"), std::string::npos) << path.error().message;
}

TEST(Gpt2ChooseModel, NoCheckpointMeansGpt2sInitialisationSaidPlainly) {
  TempDir tmp;
  ScopedEnv hub("HF_HUB_CACHE", (tmp / "empty-hub").string());
  ScopedEnv env("OSPREY_GPT2", std::nullopt);
  auto chosen = chooseModel(ModelRequest{std::nullopt, std::nullopt, 5});
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  EXPECT_EQ(chosen->label, "124M");
  EXPECT_EQ(chosen->weights.config, kGpt2_124M);
  EXPECT_EQ(chosen->weights.tensors.size(), 148u);
  for (const char* part : {"osprey: no GPT-2 checkpoint found (looked in", "models--openai-community--gpt2",
                           "using GPT-2's initialisation with seed 5",
                           "the output is not meaningful text"})
    EXPECT_NE(chosen->notice.find(part), std::string::npos) << chosen->notice;
}

}  // namespace
}  // namespace gpt2
