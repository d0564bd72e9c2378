// `osprey-gpt2 train --data FILE --steps N --batch B --seq T [--lr …] [--val-every K]
//  [--val-data FILE] [--cache-dir DIR] [--save DIR] [--save-every K] [--time-limit S] [--resume DIR]
//  [--no-plot] [--preset …] [--backend/--device …]`: the training loop (train_loop.hpp). FILE is a
// text or an llm.c token shard (gpt2/train/data.hpp). With --save, the loss history's curve is
// drawn beside it (DIR/loss.png, gpt2/train/loss_plot.hpp).
//
// --steps counts the steps of this invocation: `--steps 2 --save D`, then
// `--resume D --steps 2 --save D`, ends where `--steps 4` ends, bit for bit. A resumed run takes
// the model, the moments, the step, the data position, the batch shape and the AdamW settings
// from the checkpoint; giving a different --batch/--seq is an error, a new --lr or
// --weight-decay is used from then on (and said so). The data must be the text the checkpoint
// was trained on (its SHA-256 is in the manifest).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <streambuf>

#include <fmt/format.h>

#include "gpt2/cli/cli.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/cli_options.hpp"
#include "gpt2/train/data.hpp"
#include "gpt2/train/launch.hpp"
#include "gpt2/train/loss_plot.hpp"
#include "gpt2/train/parallel_step.hpp"
#include "gpt2/train/rank_env.hpp"
#include "gpt2/train/ranks.hpp"
#include "gpt2/train/step.hpp"

namespace gpt2 {
namespace {

struct TrainOptions {
  ModelRequest model;
  BackendChoice backend;
  std::string data;
  std::optional<std::string> valData;   // --val-data: validation from this file, not 10% of --data
  std::optional<std::string> cacheDir;  // --cache-dir: where text's token caches go
  Index steps = 0;
  Index batch = 4;
  Index seq = 64;
  Index microBatch = 0;
  Index valEvery = 0;
  Index valBatches = 8;
  Index saveEvery = 0;
  double timeLimit = 0.0;
  AdamWSettings adamw = train::defaultAdamW();
  std::optional<std::string> save;
  std::optional<std::string> resume;
  bool overwrite = false;            // --overwrite: replace the run already in --save's directory
  bool noPlot = false;               // --no-plot: no loss.gp/loss.png beside loss.csv
  int gpus = 0;                      // --gpus N: launch N ranks (0: not given)
  std::string gradSum = "exact";     // --grad-sum exact|allreduce
  bool gradSumGiven = false;         // whether the command line named one
  std::optional<std::string> rendezvous;
  // Which options were given (a resumed run keeps the checkpoint's values otherwise).
  CLI::Option* batchOption = nullptr;
  CLI::Option* seqOption = nullptr;
  CLI::Option* microOption = nullptr;
  CLI::Option* lrOption = nullptr;
  CLI::Option* decayOption = nullptr;
  CLI::Option* modelOption = nullptr;
  CLI::Option* presetOption = nullptr;
};

// The checkpoint's settings, with what the command line may change on resume.
osprey::Result<void> adoptCheckpoint(TrainOptions& o, const train::TrainerState& s, std::ostream& err) {
  if (o.modelOption->count() > 0 || o.presetOption->count() > 0)
    return osprey::Error{"--resume takes the model from the checkpoint: drop --model/--preset"};
  if ((o.batchOption->count() > 0 && o.batch != s.batch) || (o.seqOption->count() > 0 && o.seq != s.seq))
    return osprey::Error{fmt::format("the checkpoint trained with --batch {} --seq {}; resuming with "
                                     "--batch {} --seq {} would read different batches",
                                     s.batch, s.seq, o.batch, o.seq)};
  if (o.microOption->count() > 0 && o.microBatch != s.microBatch)
    err << fmt::format("note: micro-batches of {} instead of the checkpoint's {}: the sums change, so "
                       "the run will not match an uninterrupted one bit for bit\n", o.microBatch, s.microBatch);
  o.batch = s.batch;
  o.seq = s.seq;
  if (o.microOption->count() == 0) o.microBatch = s.microBatch;
  const AdamWSettings given = o.adamw;
  o.adamw = s.adamw;
  if (o.lrOption->count() > 0 && given.lr != s.adamw.lr) {
    err << fmt::format("note: learning rate {:g} from now on (the checkpoint used {:g})\n", given.lr, s.adamw.lr);
    o.adamw.lr = given.lr;
  }
  if (o.decayOption->count() > 0 && given.weightDecay != s.adamw.weightDecay) {
    err << fmt::format("note: weight decay {:g} from now on (the checkpoint used {:g})\n", given.weightDecay,
                       s.adamw.weightDecay);
    o.adamw.weightDecay = given.weightDecay;
  }
  return {};
}

// Writes nothing: stdout of ranks other than 0, which only compute.
class DiscardBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

// --gpus, the launcher's variables and --grad-sum, settled into where this process stands.
osprey::Result<train::DataParallel> dataParallel(const TrainOptions& o, const std::optional<train::RankPlace>& place) {
  train::DataParallel dp;
  if (o.gradSum == "exact") {
    dp.sum = train::GradientSum::Exact;
  } else if (o.gradSum == "allreduce") {
    dp.sum = train::GradientSum::AllReduce;
  } else {
    return osprey::Error{fmt::format("unknown --grad-sum `{}`: choose exact or allreduce", o.gradSum)};
  }
  if (o.gradSumGiven && o.backend.backend != "gpu")
    return osprey::Error{fmt::format("--grad-sum {} applies to the gpu backend's several ranks; the {} backend "
                                     "trains on one", o.gradSum, o.backend.backend)};
  if (!place) return dp;
  if (o.gpus > 0 && o.gpus != place->size)
    return osprey::Error{fmt::format("--gpus {} disagrees with the launcher's {} ranks ({})", o.gpus, place->size,
                                     place->source)};
  dp.rank = place->rank;
  dp.size = place->size;
  dp.localRank = place->localRank;
  dp.source = place->source;
  if (const char* t = std::getenv("OSPREY_NCCL_TIMEOUT"); t != nullptr && *t != '\0') {
    char* end = nullptr;
    dp.timeoutSeconds = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(dp.timeoutSeconds > 0))
      return osprey::Error{fmt::format("OSPREY_NCCL_TIMEOUT=\"{}\" is not a number of seconds above 0", t)};
  }
  if (o.rendezvous) {
    dp.rendezvous = *o.rendezvous;
  } else if (const char* r = std::getenv("OSPREY_RENDEZVOUS"); r != nullptr && *r != '\0') {
    dp.rendezvous = r;
  }
  if (dp.parallel() && dp.rendezvous.empty())
    return osprey::Error{fmt::format("rank {} of {} (from {}): give --rendezvous FILE (or OSPREY_RENDEZVOUS), a "
                                     "path every rank can see and unique to this run, where rank 0 leaves NCCL's id",
                                     dp.rank, dp.size, dp.source)};
  // Each rank takes the GPU its local rank names, unless told otherwise.
  if (std::getenv("OSPREY_CUDA_DEVICE") == nullptr)
    ::setenv("OSPREY_CUDA_DEVICE", std::to_string(dp.localRank).c_str(), 1);
  return dp;
}

// `train --gpus N` outside a launcher: start N ranks of this same command line and wait.
osprey::Result<void> launchTraining(const TrainOptions& o, CliContext& ctx) {
  const JobRunner runner = OSPREY_TRY(selectRunner(o.backend, ctx.entries));
  const HandlerRunner* chosen = runner.target<HandlerRunner>();  // null for a runner bound to settings
  if (chosen == nullptr || *chosen != ctx.entries.gpuCuda)
    return osprey::Error{fmt::format("--gpus {} runs one process per GPU: it needs --backend gpu --device cuda",
                                     o.gpus)};
  if (o.batch % o.gpus != 0)
    return osprey::Error{fmt::format("--batch {} cannot be split evenly over {} ranks: choose a multiple of {}",
                                     o.batch, o.gpus, o.gpus)};
  train::LaunchPlan plan;
  plan.program = "/proc/self/exe";
  plan.args = ctx.args;
  plan.ranks = o.gpus;
  ctx.streams.err << fmt::format("starting {} ranks, one per GPU ({} gradient sum)\n", o.gpus, o.gradSum);
  return train::launchRanks(plan, ctx.streams.err);
}

osprey::Result<void> trainOnThisRank(TrainOptions o, CliContext& ctx, const train::DataParallel& dp);

osprey::Result<void> trainCommand(TrainOptions o, CliContext& ctx) {
  const auto place = OSPREY_TRY(train::rankFromEnvironment([](const char* name) { return std::getenv(name); }));
  if (!place && o.gpus > 1) return launchTraining(o, ctx);
  const train::DataParallel dp = OSPREY_TRY(dataParallel(o, place));
  if (!dp.parallel()) return trainOnThisRank(std::move(o), ctx, dp);
  // Only rank 0 speaks; the others' errors still reach stderr, with their rank.
  DiscardBuffer discard;
  std::ostream quiet(&discard);
  CliContext rankCtx{ctx.entries, Streams{dp.leader() ? ctx.streams.out : quiet, dp.leader() ? ctx.streams.err : quiet},
                     {}, ctx.args};
  auto done = trainOnThisRank(std::move(o), rankCtx, dp);
  if (!done.ok()) return osprey::Error{fmt::format("rank {} of {}: {}", dp.rank, dp.size, done.error().message)};
  return done;
}

// A resumed run must read the text it was trained on: both files are named (the one the
// manifest records and the one given), with their digests, and whether the same path changed.
osprey::Error dataMismatch(const train::TrainerState& trained, const std::filesystem::path& checkpoint,
                           const std::string& given, const std::string& givenSha256) {
  std::error_code ec;
  const bool samePath = trained.dataPath == given || std::filesystem::equivalent(trained.dataPath, given, ec);
  return osprey::Error{fmt::format(
      "--data {} is not the text the checkpoint was trained on: {} records {} ({} tokens, SHA-256 {}), and {} has "
      "SHA-256 {}{}; give --data {} to continue this run, or start a new one",
      given, (checkpoint / "trainer_state.json").string(), trained.dataPath, trained.dataTokens, trained.dataSha256,
      given, givenSha256, samePath ? " (the file has changed since)" : "", trained.dataPath)};
}

osprey::Result<void> trainOnThisRank(TrainOptions o, CliContext& ctx, const train::DataParallel& dp) {
  std::ostream& err = ctx.streams.err;
  const JobRunner runner = OSPREY_TRY(selectRunner(o.backend, ctx.entries));
  TrainJob job;
  job.parallel = dp;
  // Before anything is read: --save's directory is refused if another run holds it, or if it
  // holds a run this one would replace (gpt2/train/run_dir.hpp). Only the rank that saves locks it.
  if (o.save && dp.leader()) job.runLock = OSPREY_TRY(train::claimRunDirectory(*o.save, o.resume, o.overwrite));
  std::optional<std::filesystem::path> modelDir;
  if (o.resume) {
    auto checkpoint = OSPREY_TRY(train::loadTrainingCheckpoint(*o.resume));
    OSPREY_CHECK(adoptCheckpoint(o, checkpoint.state, err));
    job.weights = std::move(checkpoint.weights);
    job.label = sizeLabel(job.weights.config);
    job.state = checkpoint.state;
    err << fmt::format("resuming from {} at step {}\n", *o.resume, checkpoint.state.step);
    job.resume = std::move(checkpoint);
  } else {
    auto chosen = OSPREY_TRY(chooseModel(o.model));
    if (!chosen.notice.empty()) err << chosen.notice << "\n";
    job.weights = std::move(chosen.weights);
    job.label = chosen.label;
    modelDir = chosen.directory;
    job.state.seed = o.model.seed;
  }
  const auto tokenizerDir = OSPREY_TRY(findTokenizerDir(modelDir));
  const auto tokenizer = OSPREY_TRY(Tokenizer::load(tokenizerDir));
  const train::DataSources sources{o.data, o.valData, o.cacheDir, job.weights.config.V};
  auto text = OSPREY_TRY(train::prepareTrainingText(sources, tokenizer, tokenizerDir));
  err << text.cacheNote << "\n";
  if (job.resume && job.resume->state.dataSha256 != text.sha256)
    return dataMismatch(job.resume->state, job.resume->source, o.data, text.sha256);
  OSPREY_CHECK(data::checkFitsOneBatch(static_cast<Index>(text.split.train.size()), o.batch, o.seq,
                                       "training", o.data));
  if (o.seq > job.weights.config.maxT)
    return osprey::Error{fmt::format("--seq {} exceeds the model's context of {} positions", o.seq,
                                     job.weights.config.maxT)};
  OSPREY_TRY(train::rankShare(o.batch, dp.size, o.microBatch));
  if (o.steps < 0) return osprey::Error{"--steps must be 0 or more"};

  TrainSettings& st = job.settings;
  st.steps = o.steps;
  st.batch = o.batch;
  st.seq = o.seq;
  st.microBatch = o.microBatch;
  st.valEvery = o.valEvery;
  st.valBatches = o.valBatches;
  st.saveEvery = o.saveEvery;
  st.timeLimitSeconds = o.timeLimit;
  st.adamw = o.adamw;
  if (o.save) st.saveDir = std::filesystem::path(*o.save);
  st.tokenizerDir = tokenizerDir;
  st.progressBar = &ctx.streams.out == &std::cout && ::isatty(STDOUT_FILENO) == 1;

  job.state.batch = o.batch;
  job.state.seq = o.seq;
  job.state.microBatch = o.microBatch;
  job.state.adamw = o.adamw;
  job.state.dataPath = o.data;
  job.state.dataSha256 = text.sha256;
  job.state.dataTokens = text.tokens;
  job.state.label = job.label;
  job.trainTokens = std::move(text.split.train);
  job.valTokens = std::move(text.split.val);
  err << fmt::format("data: {} tokens ({} train, {} validation{}); {} steps of {} x {} tokens, AdamW lr {:g} "
                     "weight decay {:g}\n",
                     job.state.dataTokens, job.trainTokens.size(), job.valTokens.size(),
                     o.valData ? " from " + *o.valData : "", o.steps, o.batch, o.seq,
                     o.adamw.lr, o.adamw.weightDecay);
  err.flush();
  // The loss curve (gpt2/train/loss_plot.hpp): its gnuplot program before the run, so it can be
  // redrawn while the run goes on; loss.png after it, also after a run that stopped at a bad step.
  bool plot = o.save && dp.leader() && !o.noPlot;
  if (plot) {
    const auto written = train::writeLossCurveProgram(
        *o.save, fmt::format("gpt2 ({}), --backend {}: {}, batch {} x {}, lr {:g}", job.label, o.backend.backend,
                             o.data, o.batch, o.seq, o.adamw.lr));
    if (!written.ok()) ctx.streams.out << "loss curve not drawn: " << written.error().message << "\n";
    plot = written.ok();
  }
  ModelJob any = std::move(job);
  auto done = runner(any, ctx.streams);
  if (plot) {
    const auto curve = train::drawLossCurve(*o.save);
    if (!curve.note.empty()) ctx.streams.out << curve.note << "\n";
  }
  return done;
}

}  // namespace

void addTrainCommand(CLI::App& app, CliContext& ctx) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "train on a text file, with validation, checkpoints and resume");
  addBackendOptions(*sub, o->backend);
  addModelOptions(*sub, o->model);
  o->modelOption = sub->get_option("--model");
  o->presetOption = sub->get_option("--preset");
  train::addDataOptions(*sub, o->data, o->batch, o->seq, o->microBatch);
  sub->add_option("--val-data", o->valData,
                  "validate on this file (text or llm.c token shard) instead of the last 10% of --data, which "
                  "then trains whole");
  sub->add_option("--cache-dir", o->cacheDir,
                  "where a text's token cache goes (default: $XDG_CACHE_HOME/osprey, else ~/.cache/osprey)");
  o->batchOption = sub->get_option("--batch");
  o->seqOption = sub->get_option("--seq");
  o->microOption = sub->get_option("--micro-batch");
  train::addAdamWOptions(*sub, o->adamw);
  o->lrOption = sub->get_option("--lr");
  o->decayOption = sub->get_option("--weight-decay");
  sub->add_option("--steps", o->steps, "steps to run in this invocation")
      ->required()
      ->check(train::countWithin(train::kCount));
  sub->add_option("--val-every", o->valEvery, "validation loss every K steps (0: never)")
      ->capture_default_str()
      ->check(train::countWithin(train::kCount));
  sub->add_option("--val-batches", o->valBatches, "validation batches per evaluation")
      ->capture_default_str()
      ->check(train::countWithin(train::kAtLeastOne));
  sub->add_option("--save", o->save,
                  "directory for checkpoints (DIR/checkpoint), loss.csv and its curve loss.png (drawn by gnuplot, "
                  "when installed; `gnuplot DIR/loss.gp` redraws it)");
  sub->add_flag("--no-plot", o->noPlot, "draw no loss.png (nor its gnuplot program loss.gp) in the --save directory");
  sub->add_option("--save-every", o->saveEvery, "also checkpoint every K steps (0: only at the end)")
      ->capture_default_str()
      ->check(train::countWithin(train::kCount));
  sub->add_option("--time-limit", o->timeLimit,
                  "stop (and save) after the step that reaches this many seconds (0: no limit)")
      ->capture_default_str()
      ->check(train::realWithin(train::kNonNegative));
  sub->add_option("--resume", o->resume, "continue from a checkpoint (a --save directory or its checkpoint/)");
  sub->add_flag("--overwrite", o->overwrite,
                "let --save replace the training run already in its directory (else refused, unless --resume "
                "continues that run)");
  sub->add_option("--gpus", o->gpus,
                  "data-parallel on N GPUs of this host: one process per GPU, the global --batch split evenly "
                  "(needs --backend gpu --device cuda and NCCL)")
      ->check(train::countWithin(train::kGpus));
  sub->add_option("--grad-sum", o->gradSum,
                  "how ranks combine gradients: exact (fixed order, the same bits on any number of GPUs) or "
                  "allreduce (NCCL's all-reduce, faster)")
      ->capture_default_str()
      ->each([o](const std::string&) { o->gradSumGiven = true; });
  sub->add_option("--rendezvous", o->rendezvous,
                  "under mpirun/srun/torchrun: a file path every rank can see, unique to this run, where rank 0 "
                  "leaves NCCL's id (default: $OSPREY_RENDEZVOUS)");
  sub->callback([o, &ctx] { ctx.result = trainCommand(*o, ctx); });
}

}  // namespace gpt2
