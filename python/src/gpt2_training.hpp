// Training GPT-2 from Python: the data made ready once (as `osprey-gpt2 train` makes it: a text
// tokenised through the cache, or llm.c token shards; 90% / 10% unless a validation file is
// given), and the training loop of gpt2/train/loop.hpp over a Gpt2Session, with a progress
// callback where the CLI prints a line. The same batches, steps and validation losses as the CLI's
// loop, so an exact handler gives the CLI's losses and weights bit for bit.
//
// Left to the CLI: checkpoints with AdamW's moments (--save, --resume), loss.csv and its plot,
// several GPUs, the time limit and signals (a Python program stops the loop from its callback).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpt2/layers/adamw.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/train/data_batches.hpp"
#include "gpt2_session.hpp"
#include "osprey/result.hpp"

namespace osprey::python {

// A training run's tokens, and where its next training batch starts.
struct TrainingData {
  std::shared_ptr<const gpt2::data::TokenSplit> split;
  std::string source;   // the data's path, for messages
  std::string sha256;   // of the data file
  std::string note;     // how the tokens were had (the cache, a shard), one line per file
  Index position = 0;   // the training stream's position and epoch (data_batches.hpp)
  Index epoch = 0;
};

// `path` (and `valPath`) ready to train a model of `vocab` tokens on.
Result<TrainingData> prepareTrainingData(const std::string& path, const std::optional<std::string>& valPath,
                                         const std::optional<std::string>& cacheDir, const gpt2::Tokenizer& tokenizer,
                                         const std::filesystem::path& tokenizerDir, Index vocab);

// How the loop runs: the CLI's train options of the same names.
struct TrainSettings {
  Index steps = 0;
  Index batch = 4;
  Index seq = 64;
  Index microBatch = 0;  // 0: the whole batch
  Index valEvery = 0;    // validation every K steps, and after the last (0: never)
  Index valBatches = 8;  // batches of the validation split per validation
  gpt2::AdamWSettings adamw;
};

// One step, as the CLI's progress line reports it.
struct StepRecord {
  Index step = 0;                    // updates applied so far (1, 2, ...)
  Index lastStep = 0;                // where this run ends
  Scalar loss = 0.0;                 // the step's training loss
  std::optional<Scalar> valLoss;     // on validation steps
  double seconds = 0.0;              // the step's wall time
  double tokensPerSecond = 0.0;
};

struct TrainOutcome {
  std::vector<StepRecord> steps;
  std::vector<std::string> notes;  // what the CLI says on its own lines (validation skipped, ...)
};

// Called after each step; false stops the loop there, an Error stops it and is returned.
using Progress = std::function<Result<bool>(const StepRecord&)>;

// `settings.steps` steps on `data`'s training stream (continuing at its position, which is left
// after the last step), validating as the CLI's loop does.
Result<TrainOutcome> trainLoop(Gpt2Session& session, TrainingData& data, const TrainSettings& settings,
                               const Progress& progress);

}  // namespace osprey::python
