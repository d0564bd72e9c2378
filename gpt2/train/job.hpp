// The two training jobs a handler runs (run.hpp's ModelJob holds them): everything that does not
// depend on the handler is settled on the host before one is chosen (weights read or
// initialised, text tokenised, the batch cut, a checkpoint read).
//
//   TrainStepJob  `osprey-gpt2 train-step`: one step on one batch, printing the loss, the sum of
//                 every gradient tensor and the loss after the step (train_run_job.hpp)
//   TrainJob      `osprey-gpt2 train`: the training loop (train_loop.hpp)
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpt2/train/data_batches.hpp"
#include "gpt2/layers/adamw.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/data_parallel.hpp"
#include "gpt2/train/run_dir.hpp"
#include "gpt2/model/weights.hpp"

namespace gpt2 {

struct TrainStepJob {
  HostWeights weights;
  std::string label;         // "124M", "tiny": the header line's model name
  data::Batch batch;         // (B, T) inputs and targets
  Index microBatch = 0;      // rows per micro-batch (0: the whole batch)
  AdamWSettings adamw;
  std::string description;   // a line saying where the batch came from
  bool timing = false;       // the step's wall time on stderr
};

// How the loop runs (all fixed before a handler is chosen).
struct TrainSettings {
  Index steps = 0;           // steps to run in this invocation
  Index batch = 0;           // B
  Index seq = 0;             // T
  Index microBatch = 0;      // M (0: the whole batch)
  Index valEvery = 0;        // validation every K steps (0: never)
  Index valBatches = 0;      // batches of the validation split per evaluation
  Index saveEvery = 0;       // checkpoint every K steps (0: only at the end)
  double timeLimitSeconds = 0.0;  // stop after the step that reaches this wall time (0: none)
  AdamWSettings adamw;
  std::optional<std::filesystem::path> saveDir;
  std::filesystem::path tokenizerDir;  // copied into each checkpoint
  bool progressBar = false;  // stdout is a terminal: one redrawn line; else plain log lines
};

struct TrainJob {
  HostWeights weights;
  std::string label;
  std::optional<train::HostCheckpoint> resume;  // moments, step and data position to continue from
  std::vector<data::TokenId> trainTokens;        // the first 90% of the text's tokens
  std::vector<data::TokenId> valTokens;          // the last 10%
  TrainSettings settings;
  train::TrainerState state;  // the manifest's fixed fields (data path, digest, seed, label...)
  train::DataParallel parallel;  // this process's rank (size 1: a single-process run)
  std::shared_ptr<train::RunDirectoryLock> runLock;  // the --save directory, held for the run (run_dir.hpp)
};

}  // namespace gpt2
