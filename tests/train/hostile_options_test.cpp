// Item: hyper-parameters that are NaN, infinite, negative or out of range are errors before
// anything runs, on the command line and in a resumed run's trainer_state.json; each error names
// the option or the file and key, and the allowed range in a few characters.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/temp_dir.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/limits.hpp"
#include "hostile_helpers.hpp"

namespace fs = std::filesystem;
using gpt2::testing::TempDir;
using namespace osprey::testing::train;

namespace {

struct BadOption {
  std::string option, value, expected;  // `expected`: a fragment the message must hold
};

// An error message that fits on a screen: no 300-digit bound (DBL_MAX printed in full).
void expectShort(const std::string& err) {
  EXPECT_LT(err.size(), 600u) << err;
  EXPECT_EQ(err.find("179769313486231570"), std::string::npos) << err;
}

}  // namespace

TEST(HostileTrainOptions, NonFiniteNegativeOrOutOfRangeHyperParametersAreRefused) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const std::vector<BadOption> cases = {
      {"--lr", "nan", "nan"},           {"--lr", "-1", "> 0"},          {"--lr", "0", "> 0"},
      {"--lr", "inf", "inf"},           {"--lr", "1e999", "1e999"},
      {"--beta1", "1", "[0, 1)"},       {"--beta1", "-0.5", "[0, 1)"},  {"--beta1", "nan", "nan"},
      {"--beta2", "1", "[0, 1)"},       {"--beta2", "1.5", "[0, 1)"},   {"--eps", "0", "> 0"},
      {"--eps", "-1e-8", "> 0"},        {"--eps", "nan", "nan"},        {"--weight-decay", "-0.1", ">= 0"},
      {"--weight-decay", "inf", "inf"}, {"--time-limit", "nan", "nan"}, {"--time-limit", "-1", ">= 0"},
      {"--lr", "0x1p-3", "0x1p-3"},     {"--lr", "3abc", "3abc"},
      // Counts: their real range, never double's 309-digit maximum.
      {"--batch", "0", "0 is out of range: more than 0"},   {"--seq", "-2", "-2 is out of range: more than 0"},
      {"--steps", "-3", "-3 is out of range: 0 or more"},   {"--val-batches", "0", "more than 0"},
      {"--save-every", "-1", "0 or more"},                  {"--micro-batch", "-1", "0 or more"},
      {"--gpus", "0", "0 is out of range: in [1, 2147483647]"},
      {"--batch", "99999999999999999999999", "out of range"}, {"--val-every", "1.5", "1.5"},
  };
  for (const BadOption& c : cases) {
    // With --save: a refused option must not even create the directory.
    const fs::path save = dir / "never";
    CliRun r = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", save.string(), c.option, c.value});
    EXPECT_NE(r.status, 0) << c.option << " " << c.value;
    EXPECT_NE(r.err.find(c.option), std::string::npos) << c.option << " " << c.value << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.option << " " << c.value << ": " << r.err;
    expectShort(r.err);
    EXPECT_FALSE(fs::exists(save)) << c.option << " " << c.value;
    EXPECT_EQ(r.out.find("gpt2 (tiny)"), std::string::npos) << "the run started: " << r.out;
  }
  // train-step shares the AdamW options.
  CliRun step = runOsprey({"train-step", "--preset", "tiny", "--data", data, "--batch", "2", "--seq", "8",
                           "--beta2", "1"});
  EXPECT_NE(step.status, 0);
  EXPECT_NE(step.err.find("--beta2"), std::string::npos) << step.err;
  EXPECT_NE(step.err.find("[0, 1)"), std::string::npos) << step.err;
  // The edges of the ranges are allowed: beta 0, weight decay 0, a tiny positive lr.
  CliRun edges = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--beta1", "0", "--beta2", "0",
                                  "--weight-decay", "0", "--lr", "1e-300", "--time-limit", "0"});
  EXPECT_EQ(edges.status, 0) << edges.err;
}

TEST(HostileTrainOptions, RangesDescribeThemselvesBriefly) {
  using namespace gpt2::train;
  EXPECT_EQ(describe(kPositive), "a finite number > 0");
  EXPECT_EQ(describe(kBeta), "a number in [0, 1)");
  EXPECT_EQ(describe(kNonNegative), "a finite number >= 0");
  EXPECT_EQ(describe(kAtLeastOne), "an integer >= 1");
  EXPECT_FALSE(within(std::nan(""), kAnyFinite));
  EXPECT_FALSE(within(1.0, kBeta));
  EXPECT_TRUE(within(0.0, kBeta));
  // A 400-digit argument is shown by its first 40 characters and its length.
  EXPECT_EQ(shown(std::string(400, '9')), std::string(40, '9') + "... (400 characters)");
  gpt2::AdamWSettings s;
  s.eps = -1;
  auto bad = checkAdamW(s, "here");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "here: --eps is -1: must be a finite number > 0");
}

namespace {

// A valid manifest's JSON with one value replaced (`path`: members joined by '/').
std::string manifestWith(const std::string& path, const nlohmann::json& value) {
  gpt2::train::TrainerState s;
  s.step = 5;
  s.batch = 2;
  s.seq = 8;
  s.adamw.lr = 1e-3;
  s.dataPath = "t.txt";
  s.dataSha256 = "ab";
  s.label = "tiny";
  auto j = nlohmann::json::parse(gpt2::train::trainerStateJson(s));
  j[nlohmann::json::json_pointer("/" + path)] = value;
  return j.dump();
}

}  // namespace

TEST(HostileTrainOptions, ManifestValuesAreCheckedNamingTheFileAndTheKey) {
  using gpt2::train::parseTrainerState;
  ASSERT_TRUE(parseTrainerState(manifestWith("step", 5), "m.json").ok());
  struct Case {
    std::string path;
    nlohmann::json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"adamw/lr", -1, "m.json: `adamw.lr` is -1: must be a finite number > 0"},
      {"adamw/lr", 0, "m.json: `adamw.lr` is 0: must be a finite number > 0"},
      {"adamw/lr", nullptr, "m.json: `adamw.lr` is null: must be a finite number > 0"},  // NaN is written as null
      {"adamw/beta1", 2, "m.json: `adamw.beta1` is 2: must be a number in [0, 1)"},
      {"adamw/beta2", 1.0, "m.json: `adamw.beta2` is 1: must be a number in [0, 1)"},
      {"adamw/eps", "1e-8", "m.json: `adamw.eps` is \"1e-8\" (a string): must be a finite number > 0"},
      {"adamw/weight_decay", -0.5, "m.json: `adamw.weight_decay` is -0.5: must be a finite number >= 0"},
      {"step", 2.5, "m.json: `step` is 2.5: must be an integer in [0, 9223372036854775806]"},
      {"step", 3.0, "m.json: `step` is 3: must be an integer in [0, 9223372036854775806]"},
      {"step", -3, "m.json: `step` is -3: must be an integer in [0, 9223372036854775806]"},
      {"step", 1e30, "m.json: `step` is 1e+30: must be an integer in [0, 9223372036854775806]"},
      {"step", 9223372036854775807LL, "m.json: `step` is 9223372036854775807: must be an integer in [0, 9223372036854775806]"},
      {"step", 18446744073709551615ULL, "m.json: `step` is 18446744073709551615: must be an integer in [0, 9223372036854775806]"},
      {"step", "7", "m.json: `step` is \"7\" (a string): must be an integer in [0, 9223372036854775806]"},
      {"batch/batch", 0, "m.json: `batch.batch` is 0: must be an integer >= 1"},
      {"data/position", -1, "m.json: `data.position` is -1: must be an integer >= 0"},
      {"model/init_seed", -1, "m.json: `model.init_seed` is -1: must be an integer in [0, 2^64)"},
      {"last_train_loss", "nan", "m.json: `last_train_loss` is \"nan\" (a string): must be a finite number"},
  };
  for (const Case& c : cases) {
    auto r = parseTrainerState(manifestWith(c.path, c.value), "m.json");
    ASSERT_FALSE(r.ok()) << c.path << " " << c.value;
    EXPECT_EQ(r.error().message, c.expected);
  }
  // A number too large for a double parses to infinity: still a clear, short error.
  std::string text = manifestWith("adamw/lr", 12345);
  text.replace(text.find("12345"), 5, "1e400");
  auto inf = parseTrainerState(text, "m.json");
  ASSERT_FALSE(inf.ok());
  EXPECT_EQ(inf.error().message.rfind("m.json: ", 0), 0u) << inf.error().message;
  EXPECT_NE(inf.error().message.find("1e400"), std::string::npos) << inf.error().message;
  // A missing key is named.
  auto j = nlohmann::json::parse(manifestWith("step", 5));
  j["adamw"].erase("beta1");
  auto missing = parseTrainerState(j.dump(), "m.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "m.json: `adamw.beta1` is missing");
}

TEST(HostileTrainOptions, AResumedRunRefusesAnEditedManifestAndAStepCounterThatWouldOverflow) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  ASSERT_EQ(saveOneStep(data, run).status, 0);
  const fs::path manifest = trainerStateOf(run);
  const std::string good = readText(manifest);
  auto edit = [&](const std::string& path, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(good);
    j[nlohmann::json::json_pointer("/" + path)] = value;
    writeText(manifest, j.dump(2));
  };

  edit("adamw/beta1", 2);
  CliRun beta = tinyTrain(data, {"--resume", run.string(), "--steps", "1", "--save", run.string()});
  EXPECT_EQ(beta.status, 1);
  EXPECT_NE(beta.err.find("trainer_state.json: `adamw.beta1` is 2: must be a number in [0, 1)"), std::string::npos)
      << beta.err;

  edit("step", 1.5);
  CliRun step = tinyTrain(data, {"--resume", run.string(), "--steps", "1"});
  EXPECT_EQ(step.status, 1);
  EXPECT_NE(step.err.find("`step` is 1.5"), std::string::npos) << step.err;

  // The largest step the manifest allows, plus --steps, would pass what the counter holds.
  edit("step", 9223372036854775806LL);
  CliRun overflow = tinyTrain(data, {"--resume", run.string(), "--steps", "2"});
  EXPECT_EQ(overflow.status, 1);
  EXPECT_NE(overflow.err.find("--steps 2 after step 9223372036854775806"), std::string::npos) << overflow.err;
  EXPECT_NE(overflow.err.find("overflow"), std::string::npos) << overflow.err;
}
