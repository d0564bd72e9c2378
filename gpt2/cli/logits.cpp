// `osprey-gpt2 logits`: the last prompt position's logits, one per line with 17 significant
// digits (enough to round-trip a double), after the header line: for checking Osprey against
// other implementations.
#include <memory>

#include "gpt2/cli/cli.hpp"
#include "gpt2/model/generate.hpp"

namespace gpt2 {
namespace {

struct LogitsOptions {
  ModelRequest model;
  BackendChoice backend;
  std::string prompt;
};

osprey::Result<void> logitsCommand(const LogitsOptions& o, CliContext& ctx) {
  const JobRunner runner = OSPREY_TRY(selectRunner(o.backend, ctx.entries));
  if (o.prompt.empty()) return osprey::Error{"the prompt is empty: give --prompt TEXT"};
  auto chosen = OSPREY_TRY(chooseModel(o.model));
  if (!chosen.notice.empty()) {
    ctx.streams.err << chosen.notice << "\n";
    ctx.streams.err.flush();
  }
  const auto tokenizer = OSPREY_TRY(tokenizerFor(chosen.directory));
  std::vector<int> prompt = OSPREY_TRY(tokenizer.encode(o.prompt));
  OSPREY_CHECK(checkFitsContext(chosen.weights.config, static_cast<Index>(prompt.size()), 0));
  ModelJob job = LogitsJob{std::move(chosen.weights), chosen.label, std::move(prompt)};
  return runner(job, ctx.streams);
}

}  // namespace

void addLogitsCommand(CLI::App& app, CliContext& ctx) {
  auto options = std::make_shared<LogitsOptions>();
  CLI::App* sub = app.add_subcommand("logits", "print the last prompt position's logits");
  addBackendOptions(*sub, options->backend);
  addModelOptions(*sub, options->model);
  sub->add_option("--prompt", options->prompt, "text whose last position is scored")->required();
  sub->callback([options, &ctx] { ctx.result = logitsCommand(*options, ctx); });
}

}  // namespace gpt2
