// Item: non-finite weights. A model holding NaN or an infinity makes every logit NaN or ±inf, and
// generate used to print a token picked from them with status 0. Such a model is refused when it
// is loaded (gpt2/checkpoint/load.cpp), before any backend runs, so the refusal is the same on
// every backend this program offers (lists, gpu with OSPREY_GPU=host), for generate, logits,
// train-step and train, from --model, $OSPREY_GPT2 and an llm.c file: status 1, nothing on
// stdout, and the message names the file, the tensor and the element.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpt2/checkpoint/save.hpp"
#include "gpt2/model/init.hpp"
#include "files.hpp"
#include "gpt2/temp_dir.hpp"
#include "osprey/io/llmc_checkpoint.hpp"
#include "train/cli_run.hpp"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;
using osprey::testing::train::CliRun;
using osprey::testing::train::runOsprey;
using testing::ScopedEnv;
using testing::TempDir;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Poison {
  const char* tensor;   // a parameter name
  std::size_t element;  // its flat index
  double value;
  const char* shown;    // "nan", "inf", "-inf"
};

// tiny's weights with one element replaced.
HostWeights poisoned(const Poison& p) {
  HostWeights w = initialWeights(kGpt2Tiny, kDefaultSeed);
  const auto specs = parameterSpecs(w.config);
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == p.tensor) w.tensors[i].values.at(p.element) = p.value;
  return w;
}

std::string expectedMessage(const fs::path& file, const Poison& p) {
  return fmt::format("{}: {}[{}] is {}: the weights must be finite numbers", file.string(), p.tensor, p.element,
                     p.shown);
}

using osprey::testing::writeText;

// Every command that loads a model, on every backend: refused, naming `expected`.
void expectEveryCommandRefuses(const std::vector<std::string>& model, const std::string& expected,
                               const std::string& data) {
  const std::vector<std::vector<std::string>> commands{
      {"generate", "--prompt", "Hello", "--tokens", "3"},
      {"logits", "--prompt", "Hello"},
      {"train-step", "--data", data, "--batch", "1", "--seq", "8"},
      {"train", "--data", data, "--batch", "2", "--seq", "8", "--steps", "1"},
  };
  for (const char* backend : {"lists", "gpu"}) {
    ScopedEnv device("OSPREY_GPU", std::string("host"));
    for (std::vector<std::string> args : commands) {
      args.insert(args.end(), {"--backend", backend});
      args.insert(args.end(), model.begin(), model.end());
      SCOPED_TRACE(::testing::PrintToString(args));
      const CliRun r = runOsprey(args);
      EXPECT_EQ(r.status, 1);
      EXPECT_EQ(r.out, "");
      EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    }
  }
}

TEST(HostileWeights, NonFiniteWeightsInAModelDirectoryAreRefusedByEveryCommandAndBackend) {
  TempDir dir;
  const std::string data = (dir / "text.txt").string();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "First Citizen: Before we proceed any further, hear me speak.\n";
  writeText(data, text);
  const std::vector<std::pair<Poison, osprey::io::DType>> cases{
      {{"h.0.attn.c_attn.weight", 17, std::nan(""), "nan"}, osprey::io::DType::F64},
      {{"wte.weight", 0, kInf, "inf"}, osprey::io::DType::F32},
      {{"ln_f.bias", 63, -kInf, "-inf"}, osprey::io::DType::F64},
      {{"h.1.mlp.c_proj.bias", 5, std::nan(""), "nan"}, osprey::io::DType::BF16},
  };
  for (const auto& [p, dtype] : cases) {
    SCOPED_TRACE(p.tensor);
    const fs::path model = dir / "m";
    auto saved = saveHfDirectory(model, poisoned(p), dtype, testing::tokenizerDir());
    ASSERT_TRUE(saved.ok()) << saved.error().message;
    const std::string expected = expectedMessage(model / "model.safetensors", p);
    expectEveryCommandRefuses({"--model", model.string()}, expected, data);
    // $OSPREY_GPT2 reads the same directory, and says so.
    ScopedEnv env("OSPREY_GPT2", model.string());
    const CliRun r = runOsprey({"generate", "--prompt", "Hello", "--tokens", "3"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("$OSPREY_GPT2: " + expected), std::string::npos) << r.err;
    fs::remove_all(model);
  }
}

TEST(HostileWeights, NonFiniteWeightsInAnLlmcFileAreRefused) {
  TempDir dir;
  const std::string data = (dir / "text.txt").string();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "All: Speak, speak. You are all resolved rather to die than to famish?\n";
  writeText(data, text);
  const Poison p{"wpe.weight", 3, std::nan(""), "nan"};
  const HostWeights w = poisoned(p);
  std::map<std::string, osprey::io::TensorData> tensors;
  const auto specs = parameterSpecs(kGpt2Tiny);
  for (std::size_t i = 0; i < specs.size(); ++i) tensors[specs[i].name] = osprey::io::TensorData{specs[i].shape, w.tensors[i].values};
  const fs::path bin = dir / "gpt2_tiny.bin";
  const osprey::io::LlmcConfig config{kGpt2Tiny.maxT, kGpt2Tiny.V, kGpt2Tiny.L, kGpt2Tiny.NH, kGpt2Tiny.C, 50304};
  auto written = osprey::io::writeLlmcCheckpoint(bin.string(), config, tensors, osprey::io::DType::F32);
  ASSERT_TRUE(written.ok()) << written.error().message;
  expectEveryCommandRefuses({"--model", bin.string()}, expectedMessage(bin, p), data);
}

// The check costs one pass over the weights and refuses nothing finite: the largest doubles, and
// a model without any defect, still run.
TEST(HostileWeights, FiniteExtremesStillLoad) {
  TempDir dir;
  const fs::path model = dir / "m";
  const Poison big{"h.0.ln_1.bias", 0, -1.7976931348623157e308, ""};
  ASSERT_TRUE(saveHfDirectory(model, poisoned(big), osprey::io::DType::F64, testing::tokenizerDir()).ok());
  const CliRun r = runOsprey({"logits", "--model", model.string(), "--prompt", "Hi"});
  EXPECT_EQ(r.err.find("must be finite"), std::string::npos) << r.err;
  const fs::path plain = dir / "plain";
  ASSERT_TRUE(saveHfDirectory(plain, initialWeights(kGpt2Tiny, kDefaultSeed), osprey::io::DType::F32,
                              testing::tokenizerDir()).ok());
  const CliRun ok = runOsprey({"generate", "--model", plain.string(), "--prompt", "Hi", "--tokens", "2"});
  EXPECT_EQ(ok.status, 0) << ok.err;
}

}  // namespace
}  // namespace gpt2
