// Training checkpoints: everything a run needs to continue bit for bit, saved atomically.
//
// `--save DIR` keeps the latest checkpoint in DIR/checkpoint/:
//
//   config.json, model.safetensors, vocab.json, merges.txt
//                         a Hugging Face GPT-2 directory (checkpoint_save.hpp), weights in F64 so
//                         they are the training weights exactly; `generate --model
//                         DIR/checkpoint` and transformers load it unchanged
//   optimizer.safetensors the AdamW moments, F64: `m.<name>` and `v.<name>` per parameter
//   trainer_state.json    the manifest: step, data position, batch shape, hyper-parameters,
//                         the data file's digest, the initialisation seed (below)
//
// Atomicity: a checkpoint is written whole into DIR/checkpoint.tmp-<pid>/ (each file fsynced),
// then swapped with DIR/checkpoint in one step (renameat2 RENAME_EXCHANGE; where the file system
// lacks it, two renames with DIR/checkpoint.old-<pid> as the fallback a loader also accepts),
// and the old one is removed. A save interrupted at any point leaves the previous checkpoint
// whole at DIR/checkpoint (or, in the two-rename window, at DIR/checkpoint.old-<pid>; the next
// save moves the newest such old-* back to DIR/checkpoint before clearing the rest, and a loader
// without DIR/checkpoint picks the same one: leftovers.hpp).
//
// Random state: the loop draws no random numbers (batches are read in order, GPT-2 has no
// dropout here), so there is no generator state to save; the manifest records that, and the
// seed the weights were initialised with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "gpt2/layers/adamw.hpp"
#include "gpt2/model/weights.hpp"
#include "osprey/result.hpp"

namespace gpt2::train {

// The manifest (trainer_state.json).
struct TrainerState {
  Index step = 0;           // AdamW updates applied so far
  Index dataPosition = 0;   // where the next training batch starts in the training split
  Index dataEpoch = 0;      // how many times the training split has wrapped
  Index batch = 0;          // B
  Index seq = 0;            // T
  Index microBatch = 0;     // M (0: the whole batch at once)
  AdamWSettings adamw;
  std::string dataPath;     // as given on the command line
  std::string dataSha256;   // the text the tokens came from
  Index dataTokens = 0;     // tokens in the whole file (train + val)
  std::uint64_t seed = 0;   // the initialisation's seed (when the run started from one)
  std::string label;        // "tiny", "124M", ...
  double lastTrainLoss = 0.0;
};

// A checkpoint on the host: weights, moments, manifest.
struct HostCheckpoint {
  HostWeights weights;
  HostWeights m;
  HostWeights v;
  TrainerState state;
  std::filesystem::path source;  // the directory it was read from (loadTrainingCheckpoint)
  std::string note;              // how it was chosen, when that is not obvious (an old-* fallback)
};

// DIR/checkpoint
std::filesystem::path checkpointDir(const std::filesystem::path& saveDir);

// Saves `c` as saveDir's checkpoint (see the file comment); tokenizerDir supplies vocab.json and
// merges.txt. saveDir is created if needed. A checkpoint holding a NaN or an infinity is refused
// (an error naming the element; nothing on disk changes), so a good checkpoint is never replaced
// by one that cannot be trained from.
osprey::Result<void> saveTrainingCheckpoint(const std::filesystem::path& saveDir, const HostCheckpoint& c,
                                            const std::filesystem::path& tokenizerDir);

// Reads a checkpoint from `path`: a save directory (holding checkpoint/, else the newest
// checkpoint.old-* by leftovers.hpp's rule, said in `note`) or a checkpoint directory itself.
// Errors name the file and the problem (a manifest value out of range names its key; NaN or an
// infinity among the weights or moments names the element).
osprey::Result<HostCheckpoint> loadTrainingCheckpoint(const std::filesystem::path& path);

// The manifest's JSON text, and back (exposed for tests; manifest.cpp).
std::string trainerStateJson(const TrainerState& s);
osprey::Result<TrainerState> parseTrainerState(const std::string& json, const std::string& label);

// Test hook: the next saves stop just before the swap, returning an error, as a process killed
// at that moment would leave things (the environment variable
// OSPREY_FAIL_BEFORE_CHECKPOINT_SWAP=1 does the same).
void setFailBeforeCheckpointSwapForTesting(bool fail);

}  // namespace gpt2::train
