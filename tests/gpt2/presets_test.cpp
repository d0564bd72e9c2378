// Every GPT-2 size OpenAI released, as Osprey's presets: each preset is the shape of its Hugging
// Face config.json (the fields of openai-community/gpt2, gpt2-medium, gpt2-large and gpt2-xl,
// written out below), has the parameter count Hugging Face reports, HF's tensor names and shapes
// at its width, and answers to the names users give it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "gpt2/checkpoint/config.hpp"
#include "gpt2/model/config.hpp"
#include "gpt2/model/weights.hpp"
#include "gpt2/temp_dir.hpp"
#include "train/cli_run.hpp"

namespace gpt2 {
namespace {

struct Size {
  const char* name;     // as llm.c and nanoGPT name it
  const char* hubName;  // the Hugging Face model
  Config preset;
  const char* hfConfig;  // that model's config.json (the fields that fix its shape, as published)
  Index L, NH, C;        // n_layer, n_head, n_embd, again as numbers
  Index parameters;      // GPT2LMHeadModel's num_parameters() (the lm head tied to wte)
};

const std::vector<Size>& sizes() {
  static const std::vector<Size> all{
      {"124M", "gpt2", kGpt2_124M,
       R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "layer_norm_epsilon": 1e-05,
           "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
           "vocab_size": 50257})",
       12, 12, 768, 124'439'808},
      {"350M", "gpt2-medium", kGpt2_350M,
       R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "layer_norm_epsilon": 1e-05,
           "model_type": "gpt2", "n_ctx": 1024, "n_embd": 1024, "n_head": 16, "n_layer": 24, "n_positions": 1024,
           "n_special": 0, "predict_special_tokens": true, "vocab_size": 50257})",
       24, 16, 1024, 354'823'168},
      {"774M", "gpt2-large", kGpt2_774M,
       R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "layer_norm_epsilon": 1e-05,
           "model_type": "gpt2", "n_ctx": 1024, "n_embd": 1280, "n_head": 20, "n_layer": 36, "n_positions": 1024,
           "vocab_size": 50257})",
       36, 20, 1280, 774'030'080},
      {"1558M", "gpt2-xl", kGpt2_1558M,
       R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "layer_norm_epsilon": 1e-05,
           "model_type": "gpt2", "n_ctx": 1024, "n_embd": 1600, "n_head": 25, "n_layer": 48, "n_positions": 1024,
           "output_past": true, "vocab_size": 50257})",
       48, 25, 1600, 1'557'611'200},
  };
  return all;
}

TEST(Gpt2Presets, EachSizeIsItsHuggingFaceConfig) {
  for (const Size& s : sizes()) {
    SCOPED_TRACE(s.name);
    const auto read = parseHfConfig(s.hfConfig, std::string(s.hubName) + "/config.json");
    ASSERT_TRUE(read.ok()) << read.error().message;
    EXPECT_EQ(*read, s.preset);
    EXPECT_EQ(s.preset, (Config{1024, 50257, s.L, s.NH, s.C}));
    EXPECT_EQ(s.C / s.NH, 64) << "every GPT-2 size has heads of 64 channels";
    EXPECT_FALSE(configProblem(s.preset).has_value());
    // The config.json Osprey writes for it reads back as the same shape.
    const auto written = parseHfConfig(hfConfigText(s.preset), "written");
    ASSERT_TRUE(written.ok()) << written.error().message;
    EXPECT_EQ(*written, s.preset);
  }
}

TEST(Gpt2Presets, EachSizeHasHuggingFacesParameterCountNamesAndShapes) {
  for (const Size& s : sizes()) {
    SCOPED_TRACE(s.name);
    const Index C = s.C;
    EXPECT_EQ(parameterCount(s.preset), s.parameters);
    const auto specs = parameterSpecs(s.preset);
    ASSERT_EQ(static_cast<Index>(specs.size()), 2 + 12 * s.L + 2);
    EXPECT_EQ(parameterTensorCount(s.preset), 2 + 12 * s.L + 2);
    Index total = 0;
    for (const auto& spec : specs) total += spec.elements();
    EXPECT_EQ(total, s.parameters);
    EXPECT_EQ(specs[0].name, "wte.weight");
    EXPECT_EQ(specs[0].shape, (std::vector<Index>{50257, C}));
    EXPECT_EQ(specs[1].name, "wpe.weight");
    EXPECT_EQ(specs[1].shape, (std::vector<Index>{1024, C}));
    // Every block's tensors, as transformers names and shapes them (Conv1D weights are (in, out)).
    const std::vector<std::pair<std::string, std::vector<Index>>> block{
        {"ln_1.weight", {C}},           {"ln_1.bias", {C}},
        {"attn.c_attn.weight", {C, 3 * C}}, {"attn.c_attn.bias", {3 * C}},
        {"attn.c_proj.weight", {C, C}},  {"attn.c_proj.bias", {C}},
        {"ln_2.weight", {C}},           {"ln_2.bias", {C}},
        {"mlp.c_fc.weight", {C, 4 * C}}, {"mlp.c_fc.bias", {4 * C}},
        {"mlp.c_proj.weight", {4 * C, C}}, {"mlp.c_proj.bias", {C}}};
    for (Index l = 0; l < s.L; ++l)
      for (std::size_t k = 0; k < block.size(); ++k) {
        const auto& spec = specs[static_cast<std::size_t>(blockTensorIndex(l, static_cast<BlockSlot>(k)))];
        ASSERT_EQ(spec.name, "h." + std::to_string(l) + "." + block[k].first);
        ASSERT_EQ(spec.shape, block[k].second) << spec.name;
      }
    EXPECT_EQ(specs[static_cast<std::size_t>(lnfWeightIndex(s.preset))].name, "ln_f.weight");
    EXPECT_EQ(specs[static_cast<std::size_t>(lnfBiasIndex(s.preset))].name, "ln_f.bias");
    EXPECT_EQ(specs.back().shape, (std::vector<Index>{C}));
  }
}

TEST(Gpt2Presets, EachSizeAnswersToItsNames) {
  for (const Size& s : sizes()) {
    SCOPED_TRACE(s.name);
    const std::string hub(s.hubName);
    for (const std::string& name : {std::string(s.name), hub, "openai-community/" + hub})
      EXPECT_EQ(presetNamed(name), s.preset) << name;
    EXPECT_EQ(sizeLabel(s.preset), s.name);  // the run's first line: "gpt2 (350M) on ..."
  }
  EXPECT_EQ(presetNamed("tiny"), kGpt2Tiny);
  for (const char* unknown : {"", "355M", "1.5B", "gpt2-small", "GPT2", "openai-community/", "openai-community/tiny",
                              "openai-community/124M", "gpt2-xl "})
    EXPECT_FALSE(presetNamed(unknown).has_value()) << "`" << unknown << "`";
  EXPECT_EQ(presetNames(), (std::vector<std::string>{"124M", "350M", "774M", "1558M", "tiny", "gpt2", "gpt2-medium",
                                                     "gpt2-large", "gpt2-xl"}));
  EXPECT_EQ(presetChoices(), "124M (gpt2), 350M (gpt2-medium), 774M (gpt2-large), 1558M (gpt2-xl) or tiny");
}

// --preset takes every name, and a name it does not know is a usage error listing them. (Running
// a large preset here would initialise it: each name is taken through the option and then stopped
// by an error that comes before any weights are made: generate's empty prompt, init's refusal to
// write over a training run.)
TEST(Gpt2Presets, PresetOptionsTakeEveryNameAndListThemWhenWrong) {
  using osprey::testing::train::runOsprey;
  const testing::TempDir run;
  { std::ofstream(run / "loss.csv") << "step,train_loss\n"; }
  for (const std::string& name : presetNames()) {
    SCOPED_TRACE("--preset " + name);
    const auto generate = runOsprey({"generate", "--preset", name, "--prompt", ""});
    EXPECT_EQ(generate.status, 1) << generate.err;
    EXPECT_NE(generate.err.find("the prompt is empty"), std::string::npos) << generate.err;
    const auto init = runOsprey({"init", "--preset", name, "--out", run.path().string()});
    EXPECT_EQ(init.status, 1) << init.err;
    EXPECT_NE(init.err.find("loss.csv"), std::string::npos) << init.err;
  }
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"generate", "--prompt", "x"}, std::vector<std::string>{"init", "--out", "unused"}}) {
    SCOPED_TRACE(command[0]);
    std::vector<std::string> args = command;
    args.insert(args.end(), {"--preset", "3B"});
    const auto wrong = runOsprey(args);
    EXPECT_NE(wrong.status, 0);
    EXPECT_NE(wrong.status, 1) << "a usage error, not a failed run";
    for (const char* name : {"124M", "350M", "774M", "1558M", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "tiny"})
      EXPECT_NE(wrong.err.find(name), std::string::npos) << name << " in: " << wrong.err;
  }
}

}  // namespace
}  // namespace gpt2
