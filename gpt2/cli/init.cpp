// `osprey-gpt2 init --preset NAME [--seed N] [--dtype f32|f64|bf16] --out DIR`: writes a freshly
// initialised GPT-2 of a preset's shape (124M, 350M, 774M, 1558M, their Hugging Face names gpt2 ...
// gpt2-xl, or tiny) as a Hugging Face model directory (checkpoint_save.hpp) that
// `--model DIR` and transformers' GPT2LMHeadModel.from_pretrained(DIR) both load. --dtype f64
// stores the float64 weights exactly (the oracle in tools/oracle/gpt2_tiny.py loads those).
#include <memory>

#include <fmt/format.h>

#include "gpt2/checkpoint/overwrite.hpp"
#include "gpt2/checkpoint/save.hpp"
#include "gpt2/cli/cli.hpp"
#include "gpt2/model/init.hpp"

namespace gpt2 {
namespace {

struct InitOptions {
  std::string preset = "124M";
  std::uint64_t seed = kDefaultSeed;
  std::string dtype = "f32";
  std::string out;
  bool overwrite = false;  // --overwrite: replace a model already in --out
};

osprey::Result<void> initCommand(const InitOptions& o, CliContext& ctx) {
  const auto config = presetNamed(o.preset);
  if (!config) return osprey::Error{fmt::format("unknown preset `{}`: choose {}", o.preset, presetChoices())};
  const osprey::io::DType dtype = o.dtype == "f64"    ? osprey::io::DType::F64
                                  : o.dtype == "bf16" ? osprey::io::DType::BF16
                                                      : osprey::io::DType::F32;
  if (!o.overwrite) OSPREY_CHECK(refuseToReplaceModel(o.out));
  const auto tokenizerDir = OSPREY_TRY(findTokenizerDir());
  const HostWeights weights = initialWeights(*config, o.seed);
  OSPREY_CHECK(saveHfDirectory(o.out, weights, dtype, tokenizerDir));
  ctx.streams.out << fmt::format("wrote {}: GPT-2 ({}) initialised with seed {}, {} parameters as {}\n",
                                 o.out, sizeLabel(*config), o.seed, parameterCount(*config),
                                 osprey::io::dtypeName(dtype));
  return {};
}

}  // namespace

void addInitCommand(CLI::App& app, CliContext& ctx) {
  auto options = std::make_shared<InitOptions>();
  CLI::App* sub = app.add_subcommand("init", "write a freshly initialised GPT-2 model directory");
  sub->add_option("--preset", options->preset, "shape: " + presetChoices())
      ->capture_default_str()
      ->check(CLI::IsMember(presetNames()));
  sub->add_option("--seed", options->seed, "seed of the initialisation")->capture_default_str();
  sub->add_option("--dtype", options->dtype, "stored element type: f32, f64 or bf16")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f64", "bf16"}));
  sub->add_option("--out", options->out, "directory to write")->required();
  sub->add_flag("--overwrite", options->overwrite, "replace a model or checkpoint already in --out");
  sub->callback([options, &ctx] { ctx.result = initCommand(*options, ctx); });
}

}  // namespace gpt2
