// `osprey-gpt2 generate --temperature/--top-k/--top-p/--seed`, run in-process: the same text on
// lists and gpu/host, the text is the prompt and the sampled tokens, greedy stays the default,
// and options out of range are errors naming the option, before anything runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpt2/model/init.hpp"
#include "gpt2/cli_lines.hpp"
#include "gpt2/temp_dir.hpp"
#include "sampling/sampled_generation_cases.hpp"
#include "train/cli_run.hpp"

namespace gpt2 {
namespace {

using osprey::testing::train::CliRun;
using osprey::testing::train::runOsprey;

const std::vector<std::string> kTiny{"generate", "--preset", "tiny", "--prompt", "The capital of France is",
                                     "--tokens", "12"};

CliRun tiny(const std::vector<std::string>& options) {
  auto args = kTiny;
  args.insert(args.end(), options.begin(), options.end());
  return runOsprey(args);
}

using testing::afterFirstLine;

TEST(Gpt2CliSampling, ListsAndGpuHostPrintTheSameSampledText) {
  const std::vector<std::string> sample{"--temperature", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "7"};
  auto lists = tiny(sample);
  ASSERT_EQ(lists.status, 0) << lists.err;
  auto extra = sample;
  extra.insert(extra.end(), {"--backend", "gpu", "--device", "host"});
  auto host = tiny(extra);
  ASSERT_EQ(host.status, 0) << host.err;
  EXPECT_EQ(afterFirstLine(lists.out), afterFirstLine(host.out));
  // Sampling is not the greedy default.
  auto greedy = tiny({});
  ASSERT_EQ(greedy.status, 0) << greedy.err;
  EXPECT_NE(afterFirstLine(lists.out), afterFirstLine(greedy.out));
  // --temperature 0 is the greedy default, to the byte.
  auto zero = tiny({"--temperature", "0"});
  ASSERT_EQ(zero.status, 0) << zero.err;
  EXPECT_EQ(zero.out, greedy.out);
}

TEST(Gpt2CliSampling, TheTextIsThePromptAndTheTokensSampled) {
  auto r = tiny({"--temperature", "1", "--seed", "1337"});
  ASSERT_EQ(r.status, 0) << r.err;
  osprey::Lists h;
  const auto w = testing::tinyOn(h);  // the tiny preset's initialisation with seed 1337
  const auto ids = testing::tinyTokens(h, w, testing::kPrompt, 12, testing::sampledAt(1.0, 1337));
  auto tokenizer = Tokenizer::load(testing::tokenizerDir());
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ(afterFirstLine(r.out), "The capital of France is" + *tokenizer->decode(ids) + "\n");
}

TEST(Gpt2CliSampling, OptionsOutOfRangeAreErrorsNamingTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--temperature", "-1"}, "--temperature"},
      {{"--temperature", "nan"}, "--temperature"},
      {{"--temperature", "inf"}, "--temperature"},
      {{"--temperature", "1", "--top-k", "-3"}, "--top-k"},
      {{"--temperature", "1", "--top-p", "0"}, "--top-p 0"},
      {{"--temperature", "1", "--top-p", "1.01"}, "--top-p 1.01"},
      {{"--top-k", "5"}, "give --temperature"},
      {{"--top-p", "0.5"}, "give --temperature"},
      {{"--temperature", "1", "--seed", "-1"}, "--seed"},
      {{"--temperature", "1", "--seed", "18446744073709551616"}, "--seed"},
  };
  for (const auto& [options, named] : cases) {
    auto r = tiny(options);
    EXPECT_NE(r.status, 0) << options[0] << " " << options[1];
    EXPECT_EQ(r.out, "") << options[0] << " " << options[1];
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  }
  // The largest seed is a seed.
  auto top = tiny({"--temperature", "1", "--seed", "18446744073709551615"});
  EXPECT_EQ(top.status, 0) << top.err;
}

}  // namespace
}  // namespace gpt2
