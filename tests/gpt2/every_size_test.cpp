// Every GPT-2 size on lists and gpu/host, bit for bit, at one block: each preset's width, heads,
// context and full vocabulary with its depth cut to one block (depth is the one number cut; the
// products run at the real widths C, 3C, 4C and 50257): the logits of every position of a prompt,
// then a training step's loss and every gradient.
//
// What a test at these widths costs is the vocabulary times the width (80 million doubles at
// 1558M's 1600, 643 MB a copy), made, copied and summed on each handler: on the 2-core
// development machine the 768-wide test takes about 6 s and the 1600-wide one 11 s (up to twice
// that beside other builds), most of it the kernel handing out the memory of those copies (on
// huge pages: tests/CMakeLists.txt; three times as long without). Everything else is cut to the
// least that still takes each path:
//   * one test a size (logits and step share the weights and their making);
//   * weights filled from a hash at GPT-2's initial scale instead of drawn from its normal
//     initialisation (its Box-Muller draws were 4.5 s of the 1600-wide test; the values do not
//     matter to a bit-for-bit comparison, only that they are varied and of a model's scale);
//   * a 2-token prompt and a batch of 1 sequence of 2 tokens (the causal mask still in play; the
//     lm head's products are a few hundred million multiply-adds a token on lists);
//   * no AdamW: its update is element-wise, the same operations on every element whatever the
//     shape (TrainStep.ListsAndGpuHostAgreeBitForBit compares its bits), and here it would hold six
//     more copies of the embedding.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gpt2/model_cases.hpp"
#include "handlers.hpp"
#include "train/train_helpers.hpp"

namespace gpt2 {

// How gtest prints a parameter: the preset's name.
void PrintTo(const Preset& p, std::ostream* os) { *os << p.name; }

namespace testing {
namespace {

// A uniform double in [-1, 1) from a 64-bit key (splitmix64's finaliser).
double unitFromKey(std::uint64_t key) {
  key += 0x9e3779b97f4a7c15ULL;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
  key ^= key >> 31;
  return static_cast<double>(key >> 11) * 0x1p-52 - 1.0;
}

// Weights of config c at GPT-2's initial scale: matrices uniform with standard deviation 0.02
// (GPT-2's initializer_range), LayerNorm gains near 1, biases near 0 but not 0.
HostWeights filledWeights(const Config& c) {
  HostWeights w{c, {}};
  const auto specs = parameterSpecs(c);
  for (std::size_t t = 0; t < specs.size(); ++t) {
    const bool gain = specs[t].shape.size() == 1 && specs[t].name.find("ln_") != std::string::npos &&
                      specs[t].name.ends_with(".weight");
    const double scale = specs[t].shape.size() == 2 ? 0.02 * 1.7320508075688772 : 0.05;  // uniform: sd = a / sqrt 3
    std::vector<Scalar> values(static_cast<std::size_t>(specs[t].elements()));
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = (gain ? 1.0 : 0.0) + scale * unitFromKey((static_cast<std::uint64_t>(t) << 40) + i);
    w.tensors.push_back(HostTensor{std::move(values)});
  }
  return w;
}

class EveryGpt2Size : public ::testing::TestWithParam<Preset> {};

TEST_P(EveryGpt2Size, LogitsAndAStepsGradientsAgreeBitForBitOnListsAndGpuHost) {
  Config c = GetParam().config;
  c.L = 1;
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  auto [onLists, onHost] = [&] {  // each handler's copy, the host's gone once they are made
    const HostWeights weights = filledWeights(c);
    return std::pair{upload(lists, weights), upload(host, weights)};
  }();
  ASSERT_TRUE(onLists.ok() && onHost.ok());
  logitsAgreeBitForBit(lists, *onLists, host, *onHost, std::span<const int>(kPrompt).first(2));
  const data::Batch batch = osprey::testing::train::smallBatch(1, 2, c.V);
  osprey::testing::train::gradientsAgreeBitForBit(lists, *onLists, host, *onHost, batch);
}

// The four sizes OpenAI released (tiny is a preset too, and tested everywhere else).
std::vector<Preset> releasedSizes() { return {kPresets.begin(), kPresets.begin() + 4}; }

INSTANTIATE_TEST_SUITE_P(AtOneBlock, EveryGpt2Size, ::testing::ValuesIn(releasedSizes()),
                         [](const ::testing::TestParamInfo<Preset>& info) {
                           return "gpt2_" + std::string(info.param.name);  // gpt2_350M
                         });

TEST(EveryGpt2SizeList, IsTheFourReleasedSizes) {
  const auto sizes = releasedSizes();
  ASSERT_EQ(sizes.size(), 4u);
  EXPECT_EQ(sizes[0].config, kGpt2_124M);
  EXPECT_EQ(sizes[1].config, kGpt2_350M);
  EXPECT_EQ(sizes[2].config, kGpt2_774M);
  EXPECT_EQ(sizes[3].config, kGpt2_1558M);
}

}  // namespace
}  // namespace testing
}  // namespace gpt2
