// `osprey-gpt2 generate`: continuation of a prompt, streamed as tokens arrive: greedy by
// default, sampled with --temperature above 0 (and --top-k, --top-p; --seed keys the draws:
// gpt2/sampling/sampling.hpp), the same tokens on every exact handler.
//
// The prompt must be at least one token: an empty prompt is an error rather than a silent start
// from <|endoftext|> (the text printed would then not begin with what the user typed). The
// prompt may be any bytes: byte-level BPE encodes invalid UTF-8 too.
#include <memory>

#include <fmt/format.h>

#include "gpt2/cli/cli.hpp"
#include "gpt2/model/generate.hpp"

namespace gpt2 {
namespace {

struct GenerateOptions {
  ModelRequest model;
  BackendChoice backend;
  std::string prompt;
  Index tokens = 20;
  bool timing = false;
  std::string decodeWeights;  // "bf16", "float", or empty: the backend's own
  sampling::SamplingSettings sampling;  // the seed is taken from `model` (--seed)
};

osprey::Result<void> generateCommand(const GenerateOptions& o, CliContext& ctx) {
  const JobRunner runner = OSPREY_TRY(selectRunner(o.backend, ctx.entries));
  if (o.prompt.empty())
    return osprey::Error{"the prompt is empty: give --prompt TEXT (GPT-2 continues at least one token)"};
  if (!o.decodeWeights.empty() && o.backend.backend != "fast")
    return osprey::Error{fmt::format("--decode-weights {} applies to the fast backend; the {} backend decodes "
                                     "from the model's own weights", o.decodeWeights, o.backend.backend)};
  sampling::SamplingSettings sampling = o.sampling;
  sampling.seed = o.model.seed;
  OSPREY_CHECK(sampling::checkSampling(sampling));
  auto chosen = OSPREY_TRY(chooseModel(o.model));
  if (!chosen.notice.empty()) {
    ctx.streams.err << chosen.notice << "\n";
    ctx.streams.err.flush();
  }
  auto tokenizer = OSPREY_TRY(tokenizerFor(chosen.directory));
  const std::vector<int> prompt = OSPREY_TRY(tokenizer.encode(o.prompt));
  OSPREY_CHECK(checkFitsContext(chosen.weights.config, static_cast<Index>(prompt.size()), o.tokens));
  ModelJob job = GenerateJob{std::move(chosen.weights), chosen.label, std::move(tokenizer), o.prompt,
                             prompt, o.tokens, o.timing, o.decodeWeights == "float", sampling};
  return runner(job, ctx.streams);
}

}  // namespace

void addGenerateCommand(CLI::App& app, CliContext& ctx) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* sub = app.add_subcommand("generate", "continue a prompt (greedy, or sampled with --temperature), streaming the text");
  addBackendOptions(*sub, options->backend);
  addModelOptions(*sub, options->model);
  sub->add_option("--prompt", options->prompt, "text to continue")->required();
  sub->add_option("--tokens", options->tokens, "how many tokens to generate")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--timing", options->timing, "print timings on stderr");
  sub->add_option("--temperature", options->sampling.temperature,
                  "0: greedy decoding (the default); above 0: sample, the logits divided by it (1: the model's own "
                  "distribution); the draws are keyed by --seed and each token's position")
      ->capture_default_str();
  sub->add_option("--top-k", options->sampling.topK, "sample among the K likeliest tokens only (0: all)")
      ->capture_default_str();
  sub->add_option("--top-p", options->sampling.topP,
                  "sample among the fewest likeliest tokens holding at least this probability (1: all)")
      ->capture_default_str();
  sub->add_option("--decode-weights", options->decodeWeights,
                  "fast backend: the weights decoding reads, bf16 copies (default) or the floats")
      ->check(CLI::IsMember({"bf16", "float"}));
  sub->callback([options, &ctx] { ctx.result = generateCommand(*options, ctx); });
}

}  // namespace gpt2
