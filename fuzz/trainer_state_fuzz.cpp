// libFuzzer target: arbitrary bytes as a training checkpoint's manifest, `trainer_state.json`,
// read by train::loadTrainingCheckpoint (gpt2/train/checkpoint.cpp) as `osprey-gpt2 train
// --resume DIR` does.
//
// The checkpoint around the manifest is real and fixed: on first use the target saves a tiny
// GPT-2's checkpoint (config.json, model.safetensors, optimizer.safetensors, the tokenizer pair)
// with saveTrainingCheckpoint, then each input replaces only its trainer_state.json. The reader
// must never crash or let an exception out. A manifest parseTrainerState refuses must be refused
// with a message naming it, and the whole checkpoint with it; a refusal of a manifest that parses
// must name a file of the checkpoint. A manifest it accepts must give the whole checkpoint, and
// must survive being written again (trainerStateJson) and read back.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "gpt2/model/weights.hpp"
#include "gpt2/train/checkpoint.hpp"

using namespace gpt2;
using namespace gpt2::train;
using osprey_fuzz::require;

namespace {

namespace fs = std::filesystem;

constexpr Config kTiny{4, 5, 1, 2, 2};  // maxT, V, L, NH, C

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool sameState(const TrainerState& a, const TrainerState& b) {
  return a.step == b.step && a.dataPosition == b.dataPosition && a.dataEpoch == b.dataEpoch && a.batch == b.batch &&
         a.seq == b.seq && a.microBatch == b.microBatch && sameBits(a.adamw.lr, b.adamw.lr) &&
         sameBits(a.adamw.beta1, b.adamw.beta1) && sameBits(a.adamw.beta2, b.adamw.beta2) &&
         sameBits(a.adamw.eps, b.adamw.eps) && sameBits(a.adamw.weightDecay, b.adamw.weightDecay) &&
         a.dataPath == b.dataPath && a.dataSha256 == b.dataSha256 && a.dataTokens == b.dataTokens &&
         a.seed == b.seed && a.label == b.label && sameBits(a.lastTrainLoss, b.lastTrainLoss);
}

HostWeights filled(double base) {
  HostWeights w{kTiny, {}};
  for (const ParameterSpec& spec : parameterSpecs(kTiny)) {
    HostTensor t;
    for (Index k = 0; k < spec.elements(); ++k) t.values.push_back(base + 0.25 * static_cast<double>(k));
    w.tensors.push_back(std::move(t));
  }
  return w;
}

struct Setup {
  fs::path saveDir;
  fs::path manifest;

  Setup() {
    const fs::path tokenizer = osprey_fuzz::scratchDir() / "tokenizer";
    std::error_code ec;
    fs::create_directories(tokenizer, ec);
    osprey_fuzz::writeBytes(tokenizer / "vocab.json", std::string_view("{\"a\": 0, \"b\": 1}"));
    osprey_fuzz::writeBytes(tokenizer / "merges.txt", std::string_view("#version: 0.2\na b\n"));
    HostCheckpoint c;
    c.weights = filled(0.5);
    c.m = filled(-1.0);
    c.v = filled(2.0);
    c.state.step = 3;
    c.state.batch = 1;
    c.state.seq = 2;
    c.state.dataPath = "train.txt";
    saveDir = osprey_fuzz::scratchDir() / "run";
    auto saved = saveTrainingCheckpoint(saveDir, c, tokenizer);
    if (!saved.ok()) osprey_fuzz::scratchFailure(saved.error().message);
    manifest = checkpointDir(saveDir) / "trainer_state.json";
    require(fs::is_regular_file(manifest, ec), "the save wrote trainer_state.json");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Setup setup;
  osprey_fuzz::writeBytes(setup.manifest, data, size);
  const std::string text(reinterpret_cast<const char*>(data), size);

  auto loaded = loadTrainingCheckpoint(setup.saveDir);
  auto parsed = parseTrainerState(text, setup.manifest.string());
  if (!parsed.ok()) {
    require(osprey_fuzz::startsWith(parsed.error().message, setup.manifest.string() + ": "),
            "a refusal names trainer_state.json");
    require(!loaded.ok() && loaded.error().message == parsed.error().message,
            "a manifest that does not parse is the checkpoint's refusal");
    return 0;
  }
  if (!loaded.ok()) {  // a check of the manifest against the rest of the checkpoint
    require(osprey_fuzz::startsWith(loaded.error().message, checkpointDir(setup.saveDir).string()),
            "a refusal names the checkpoint's file");
    return 0;
  }
  const TrainerState& s = loaded->state;
  require(sameState(s, *parsed), "the same manifest from the text");
  require(s.step >= 0 && s.dataPosition >= 0 && s.dataEpoch >= 0 && s.batch >= 1 && s.seq >= 1 && s.microBatch >= 0,
          "an accepted manifest has no negative or zero counts");
  require(loaded->weights.config == kTiny && loaded->m.config == kTiny && loaded->v.config == kTiny,
          "the checkpoint's config");
  require(checkShapes(loaded->weights, "weights").ok() && checkShapes(loaded->m, "m").ok() &&
              checkShapes(loaded->v, "v").ok(),
          "the weights and both moments whole");

  auto again = parseTrainerState(trainerStateJson(s), "rewritten trainer_state.json");
  require(again.ok() && sameState(*again, s), "the manifest Osprey writes reads back the same");
  return 0;
}
