// trainer_state.json: written by trainerStateJson, read back by parseTrainerState through the
// checked reader (manifest_reader.hpp), so every value a resumed run takes is in its range.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/manifest_reader.hpp"
#include "osprey/io/json_text.hpp"

namespace gpt2::train {
namespace {

constexpr const char* kFormat = "osprey-gpt2-train 1";

}  // namespace

std::string trainerStateJson(const TrainerState& s) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["step"] = s.step;
  j["data"] = {{"path", s.dataPath},     {"sha256", s.dataSha256}, {"tokens", s.dataTokens},
               {"position", s.dataPosition}, {"epoch", s.dataEpoch}};
  j["batch"] = {{"batch", s.batch}, {"seq", s.seq}, {"micro_batch", s.microBatch}};
  j["adamw"] = {{"lr", s.adamw.lr},   {"beta1", s.adamw.beta1},
                {"beta2", s.adamw.beta2}, {"eps", s.adamw.eps},
                {"weight_decay", s.adamw.weightDecay}};
  j["model"] = {{"label", s.label}, {"init_seed", s.seed}};
  j["rng"] = {{"state", nullptr},
              {"note", "the loop draws no random numbers: batches are read in order and there is no dropout"}};
  j["last_train_loss"] = s.lastTrainLoss;
  return j.dump(2) + "\n";
}

osprey::Result<TrainerState> parseTrainerState(const std::string& text, const std::string& label) {
  // The checked reader: "number overflow parsing '1e400'" or a key given twice, named with its key.
  const nlohmann::json j = OSPREY_TRY(osprey::io::parseJson(text, label));
  if (!j.is_object()) return osprey::Error{fmt::format("{}: not a JSON object", label)};
  const ManifestReader r(j, label);
  const std::string format = OSPREY_TRY(r.text("format"));
  if (format != kFormat)
    return osprey::Error{fmt::format("{}: format `{}` is not `{}`", label, shown(format), kFormat)};
  TrainerState s;
  s.step = OSPREY_TRY(r.integer("step", kStepCounter));
  s.dataPath = OSPREY_TRY(r.text("data.path"));
  s.dataSha256 = OSPREY_TRY(r.text("data.sha256"));
  s.dataTokens = OSPREY_TRY(r.integer("data.tokens", kCount));
  s.dataPosition = OSPREY_TRY(r.integer("data.position", kCount));
  s.dataEpoch = OSPREY_TRY(r.integer("data.epoch", kCount));
  s.batch = OSPREY_TRY(r.integer("batch.batch", kAtLeastOne));
  s.seq = OSPREY_TRY(r.integer("batch.seq", kAtLeastOne));
  s.microBatch = OSPREY_TRY(r.integer("batch.micro_batch", kCount));
  s.adamw.lr = OSPREY_TRY(r.real("adamw.lr", kPositive));
  s.adamw.beta1 = OSPREY_TRY(r.real("adamw.beta1", kBeta));
  s.adamw.beta2 = OSPREY_TRY(r.real("adamw.beta2", kBeta));
  s.adamw.eps = OSPREY_TRY(r.real("adamw.eps", kPositive));
  s.adamw.weightDecay = OSPREY_TRY(r.real("adamw.weight_decay", kNonNegative));
  s.label = OSPREY_TRY(r.text("model.label"));
  s.seed = OSPREY_TRY(r.unsignedInteger("model.init_seed"));
  s.lastTrainLoss = OSPREY_TRY(r.real("last_train_loss", kAnyFinite));
  return s;
}

}  // namespace gpt2::train
