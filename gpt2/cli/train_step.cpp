// `osprey-gpt2 train-step --data FILE --batch B --seq T [--lr …] [--backend …]`: one training step
// on the first batch of FILE's training split (a text, tokenised once and cached in the cache
// directory, or an llm.c token shard: gpt2/train/data.hpp),
// printing the loss, the sum of every gradient tensor and the loss after the AdamW step
// (train_step_job.hpp). Everything after the first line is the same bytes on every handler.
#include <memory>

#include <fmt/format.h>

#include "gpt2/cli/cli.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/cli_options.hpp"
#include "gpt2/train/data.hpp"
#include "gpt2/train/step.hpp"

namespace gpt2 {
namespace {

struct TrainStepOptions {
  ModelRequest model;
  BackendChoice backend;
  std::string data;
  std::optional<std::string> cacheDir;  // --cache-dir
  Index batch = 4;
  Index seq = 64;
  Index microBatch = 0;
  AdamWSettings adamw = train::defaultAdamW();
  bool timing = false;
};

osprey::Result<void> trainStepCommand(const TrainStepOptions& o, CliContext& ctx) {
  const JobRunner runner = OSPREY_TRY(selectRunner(o.backend, ctx.entries));
  auto chosen = OSPREY_TRY(chooseModel(o.model));
  if (!chosen.notice.empty()) ctx.streams.err << chosen.notice << "\n";
  const auto tokenizerDir = OSPREY_TRY(findTokenizerDir(chosen.directory));
  const auto tokenizer = OSPREY_TRY(Tokenizer::load(tokenizerDir));
  const train::DataSources sources{o.data, std::nullopt, o.cacheDir, chosen.weights.config.V};
  const auto text = OSPREY_TRY(train::prepareTrainingText(sources, tokenizer, tokenizerDir));
  ctx.streams.err << text.cacheNote << "\n";
  ctx.streams.err.flush();
  auto stream = OSPREY_TRY(data::BatchStream::create(text.split.train, o.batch, o.seq, "training", o.data));
  data::Batch batch = stream.next();
  OSPREY_CHECK(train::checkBatch(chosen.weights.config, batch));
  const Index micro = o.microBatch == 0 ? o.batch : o.microBatch;
  if (o.batch % micro != 0)
    return osprey::Error{fmt::format("--micro-batch {} must divide --batch {}", o.microBatch, o.batch)};

  TrainStepJob job;
  job.weights = std::move(chosen.weights);
  job.label = chosen.label;
  job.batch = std::move(batch);
  job.microBatch = o.microBatch;
  job.adamw = o.adamw;
  job.timing = o.timing;
  job.description = fmt::format(
      "batch {} x {} tokens{} from {} ({} tokens; training split {}); AdamW lr {:g} betas ({:g}, {:g}) "
      "eps {:g} weight decay {:g}",
      o.batch, o.seq, micro == o.batch ? "" : fmt::format(" in micro-batches of {}", micro), o.data,
      text.tokens, text.split.train.size(), o.adamw.lr, o.adamw.beta1, o.adamw.beta2, o.adamw.eps,
      o.adamw.weightDecay);
  ModelJob any = std::move(job);
  return runner(any, ctx.streams);
}

}  // namespace

void addTrainStepCommand(CLI::App& app, CliContext& ctx) {
  auto o = std::make_shared<TrainStepOptions>();
  CLI::App* sub = app.add_subcommand(
      "train-step", "one training step: the loss, every gradient's sum, the loss after AdamW");
  addBackendOptions(*sub, o->backend);
  addModelOptions(*sub, o->model);
  train::addDataOptions(*sub, o->data, o->batch, o->seq, o->microBatch);
  sub->add_option("--cache-dir", o->cacheDir,
                  "where a text's token cache goes (default: $XDG_CACHE_HOME/osprey, else ~/.cache/osprey)");
  train::addAdamWOptions(*sub, o->adamw);
  sub->add_flag("--timing", o->timing, "print the step's time on stderr");
  sub->callback([o, &ctx] { ctx.result = trainStepCommand(*o, ctx); });
}

}  // namespace gpt2
