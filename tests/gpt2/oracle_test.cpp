// GPT-2 (tiny) against an independent oracle: transformers' GPT2LMHeadModel in float64, loading
// the model directory `osprey-gpt2 init --preset tiny --dtype f64` wrote. The golden files are
// made by tools/oracle/gpt2_tiny.py (the lively one with --wpe-scale 200, whose continuation
// varies); these tests fail (never skip) when one is missing.
//
// Tolerance: each logit within 1e-10 relative, |osprey - oracle| <= 1e-10 * max(|oracle|, 1e-6)
// (the floor keeps a logit that happens to be ~0 from demanding more than float64 summation
// order can give). The greedy continuation must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gpt2/model/generate.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/model/model.hpp"
#include "gpt2/temp_dir.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "handlers.hpp"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;

const char* const kGoldenPath = "tests/golden/gpt2_tiny_logits.json";
const char* const kRegenerate =
    "generate it with `python3 tools/oracle/gpt2_tiny.py --osprey build/gpt2/osprey-gpt2` "
    "(needs torch and transformers; runs on CPU in seconds) and commit it";
const char* const kLivelyGoldenPath = "tests/golden/gpt2_tiny_lively.json";
const char* const kRegenerateLively =
    "generate it with `python3 tools/oracle/gpt2_tiny.py --osprey build/gpt2/osprey-gpt2 --wpe-scale 200 "
    "--out tests/golden/gpt2_tiny_lively.json` (needs torch and transformers) and commit it";

struct Golden {
  nlohmann::json json;
  std::vector<int> promptIds, continuation;
  std::vector<double> logits;
  std::uint64_t seed = 0;
};

// Loads a golden file, or records a failure naming the script that makes it.
std::optional<Golden> loadGolden(const char* goldenPath = kGoldenPath, const char* regenerate = kRegenerate) {
  const fs::path path = fs::path(OSPREY_SOURCE_DIR) / goldenPath;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << path.string() << " is missing: " << regenerate;
    return std::nullopt;
  }
  Golden g;
  try {
    in >> g.json;
    g.promptIds = g.json.at("prompt_ids").get<std::vector<int>>();
    g.continuation = g.json.at("continuation_ids").get<std::vector<int>>();
    g.logits = g.json.at("logits").get<std::vector<double>>();
    g.seed = g.json.at("seed").get<std::uint64_t>();
  } catch (const std::exception& e) {
    ADD_FAILURE() << path.string() << " is malformed (" << e.what() << "): " << regenerate;
    return std::nullopt;
  }
  return g;
}

// The golden was made from the weights Osprey initialises now: the per-tensor sums agree.
void expectSameInitialisation(const Golden& g, const HostWeights& w) {
  const auto& config = g.json.at("config");
  ASSERT_EQ(config.at("n_layer").get<Index>(), kGpt2Tiny.L);
  ASSERT_EQ(config.at("n_head").get<Index>(), kGpt2Tiny.NH);
  ASSERT_EQ(config.at("n_embd").get<Index>(), kGpt2Tiny.C);
  ASSERT_EQ(config.at("n_positions").get<Index>(), kGpt2Tiny.maxT);
  ASSERT_EQ(config.at("vocab_size").get<Index>(), kGpt2Tiny.V);
  const auto specs = parameterSpecs(kGpt2Tiny);
  const auto& sums = g.json.at("parameter_sums");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(sums.contains(specs[i].name)) << specs[i].name;
    long double sum = 0;
    for (double x : w.tensors[i].values) sum += x;
    const double theirs = sums.at(specs[i].name).get<double>();
    ASSERT_NEAR(static_cast<double>(sum), theirs, 1e-9 * (1.0 + std::fabs(theirs)))
        << specs[i].name << ": Osprey's initialisation changed since " << kGoldenPath
        << " was made; " << kRegenerate;
  }
}

template <class H>
void matchesTheOracle(H& h, const Golden& g, const HostWeights& host) {
  auto w = prepareForward(h, std::move(*upload(h, host)));
  ASSERT_TRUE(w.ok()) << w.error().message;
  auto tokens = tokenBuffer(h, std::span<const int>(g.promptIds));
  ASSERT_TRUE(tokens.ok());
  auto step = prefill(h, *w, *tokens, static_cast<Index>(g.promptIds.size()));
  ASSERT_TRUE(step.ok()) << step.error().message;
  const auto logits = osprey::testing::readAll(h, step->logits);
  ASSERT_EQ(logits.size(), g.logits.size());
  double worst = 0;
  std::size_t worstAt = 0;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    const double rel = std::fabs(logits[v] - g.logits[v]) / std::max(std::fabs(g.logits[v]), 1e-6);
    if (rel > worst) worst = rel, worstAt = v;
  }
  EXPECT_LE(worst, 1e-10) << "worst logit " << worstAt << ": osprey " << logits[worstAt]
                          << ", oracle " << g.logits[worstAt];
  auto none = [](int) -> osprey::Result<void> { return {}; };
  auto continuation = generateGreedy(h, *w, std::span<const int>(g.promptIds),
                                     static_cast<Index>(g.continuation.size()), none);
  ASSERT_TRUE(continuation.ok()) << continuation.error().message;
  EXPECT_EQ(*continuation, g.continuation);
}

TEST(Gpt2Oracle, TinyLogitsAndGreedyContinuationMatchTransformers) {
  const auto golden = loadGolden();
  if (!golden) return;  // the failure is already recorded
  const HostWeights host = initialWeights(kGpt2Tiny, golden->seed);
  expectSameInitialisation(*golden, host);
  if (HasFatalFailure()) return;

  auto tokenizer = Tokenizer::load(testing::tokenizerDir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  auto ids = tokenizer->encode(golden->json.at("prompt").get<std::string>());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, golden->promptIds) << "Osprey's tokenizer and transformers' disagree on the prompt";

  osprey::Lists lists;
  matchesTheOracle(lists, *golden, host);
  osprey::GpuHost gpu = osprey::testing::makeHandler<osprey::GpuHost>();
  matchesTheOracle(gpu, *golden, host);
}

// The lively model (position embeddings x 200, the typed tests' livelyTinyWeights): its greedy
// continuation varies, so a decoding bug that keeps the argmax cannot pass unseen; logits and
// tokens against transformers on lists and gpu/host (the typed tests tie every other handler to
// lists bit for bit).
TEST(Gpt2Oracle, LivelyTinyContinuationVariesAndMatchesTransformers) {
  const auto golden = loadGolden(kLivelyGoldenPath, kRegenerateLively);
  if (!golden) return;  // the failure is already recorded
  ASSERT_TRUE(golden->json.contains("wpe_scale")) << kLivelyGoldenPath << " names no wpe_scale";
  const double scale = golden->json.at("wpe_scale").get<double>();
  ASSERT_TRUE(scale == 200.0) << "the lively model scales wpe by 200, the golden by " << scale;
  HostWeights host = initialWeights(kGpt2Tiny, golden->seed);
  for (Scalar& x : host.tensors[kWpeIndex].values) x *= scale;
  expectSameInitialisation(*golden, host);
  if (HasFatalFailure()) return;
  std::vector<int> distinct = golden->continuation;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  EXPECT_GE(distinct.size(), 8u) << "the oracle's continuation is too uniform to test decoding";

  osprey::Lists lists;
  matchesTheOracle(lists, *golden, host);
  osprey::GpuHost gpu = osprey::testing::makeHandler<osprey::GpuHost>();
  matchesTheOracle(gpu, *golden, host);
}

}  // namespace
}  // namespace gpt2
