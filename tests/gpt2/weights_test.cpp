// GPT-2's parameter list: 148 tensors for 124M, in the documented order, with HF names/shapes.
#include <gtest/gtest.h>

#include <set>

#include "gpt2/model/config.hpp"
#include "gpt2/model/weights.hpp"

namespace gpt2 {
namespace {

TEST(Gpt2Weights, The124MModelHas148TensorsWithHuggingFaceNamesAndShapes) {
  const auto specs = parameterSpecs(kGpt2_124M);
  ASSERT_EQ(specs.size(), 148u);
  EXPECT_EQ(parameterTensorCount(kGpt2_124M), 148);

  EXPECT_EQ(specs[0].name, "wte.weight");
  EXPECT_EQ(specs[0].shape, (std::vector<Index>{50257, 768}));
  EXPECT_EQ(specs[1].name, "wpe.weight");
  EXPECT_EQ(specs[1].shape, (std::vector<Index>{1024, 768}));
  const std::vector<std::pair<std::string, std::vector<Index>>> block{
      {"ln_1.weight", {768}},           {"ln_1.bias", {768}},
      {"attn.c_attn.weight", {768, 2304}}, {"attn.c_attn.bias", {2304}},
      {"attn.c_proj.weight", {768, 768}},  {"attn.c_proj.bias", {768}},
      {"ln_2.weight", {768}},           {"ln_2.bias", {768}},
      {"mlp.c_fc.weight", {768, 3072}}, {"mlp.c_fc.bias", {3072}},
      {"mlp.c_proj.weight", {3072, 768}}, {"mlp.c_proj.bias", {768}}};
  for (Index l = 0; l < 12; ++l)
    for (std::size_t s = 0; s < block.size(); ++s) {
      const auto& spec = specs[static_cast<std::size_t>(blockTensorIndex(l, static_cast<BlockSlot>(s)))];
      EXPECT_EQ(spec.name, "h." + std::to_string(l) + "." + block[s].first);
      EXPECT_EQ(spec.shape, block[s].second) << spec.name;
    }
  EXPECT_EQ(specs[146].name, "ln_f.weight");
  EXPECT_EQ(specs[147].name, "ln_f.bias");
  EXPECT_EQ(lnfWeightIndex(kGpt2_124M), 146);
  EXPECT_EQ(lnfBiasIndex(kGpt2_124M), 147);

  std::set<std::string> names;
  Index total = 0;
  for (const auto& s : specs) {
    names.insert(s.name);
    total += s.elements();
  }
  EXPECT_EQ(names.size(), 148u) << "names are unique";
  EXPECT_EQ(total, 124'439'808);
  EXPECT_EQ(parameterCount(kGpt2_124M), 124'439'808);
}

TEST(Gpt2Weights, PresetsAndLabels) {
  EXPECT_EQ(presetNamed("124M"), kGpt2_124M);
  EXPECT_EQ(presetNamed("tiny"), kGpt2Tiny);
  EXPECT_FALSE(presetNamed("1.5B").has_value());
  EXPECT_EQ(sizeLabel(kGpt2_124M), "124M");
  EXPECT_EQ(sizeLabel(kGpt2Tiny), "tiny");
  EXPECT_EQ(sizeLabel(Config{1024, 50257, 24, 16, 1024}), "350M");  // GPT-2 medium: its preset's name
  EXPECT_EQ(sizeLabel(Config{1024, 50257, 1, 16, 1024}), "65M");    // no preset: its size in millions
  EXPECT_EQ(parameterTensorCount(kGpt2Tiny), 28);
  Index total = 0;
  for (const auto& s : parameterSpecs(kGpt2Tiny)) total += s.elements();
  EXPECT_EQ(total, parameterCount(kGpt2Tiny));
}

TEST(Gpt2Weights, ConfigProblemsAreNamed) {
  EXPECT_FALSE(configProblem(kGpt2_124M).has_value());
  EXPECT_TRUE(configProblem(Config{1024, 50257, 12, 5, 768}).has_value());  // 5 does not divide 768
  EXPECT_TRUE(configProblem(Config{0, 50257, 12, 12, 768}).has_value());
  EXPECT_TRUE(configProblem(Config{1024, 50257, 12, 12, -768}).has_value());
}

TEST(Gpt2Weights, CheckShapesNamesTheWrongTensor) {
  HostWeights w{kGpt2Tiny, {}};
  for (const auto& s : parameterSpecs(kGpt2Tiny))
    w.tensors.push_back(HostTensor{std::vector<Scalar>(static_cast<std::size_t>(s.elements()))});
  EXPECT_TRUE(checkShapes(w, "test").ok());
  w.tensors[5].values.pop_back();
  auto r = checkShapes(w, "test");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("h.0.attn.c_attn.bias"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpt2
