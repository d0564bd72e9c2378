// The data and the loop of gpt2_training.hpp; each step is the session's trainStep
// (batchGradients, then adamwStep), each validation its validationLoss, in the CLI loop's order.
#include "gpt2_training.hpp"

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "gpt2/train/adamw.hpp"
#include "gpt2/train/data.hpp"
#include "gpt2/train/limits.hpp"
#include "gpt2/train/loop.hpp"  // validationBatchesAvailable: how many validation batches the CLI takes

namespace osprey::python {

Result<TrainingData> prepareTrainingData(const std::string& path, const std::optional<std::string>& valPath,
                                         const std::optional<std::string>& cacheDir, const gpt2::Tokenizer& tokenizer,
                                         const std::filesystem::path& tokenizerDir, Index vocab) {
  const gpt2::train::DataSources sources{path, valPath, cacheDir, vocab};
  auto text = OSPREY_TRY(gpt2::train::prepareTrainingText(sources, tokenizer, tokenizerDir));
  TrainingData data;
  data.split = std::make_shared<const gpt2::data::TokenSplit>(std::move(text.split));
  data.source = path;
  data.sha256 = text.sha256;
  data.note = text.cacheNote;
  return data;
}

namespace {

Result<void> checkSettings(const TrainSettings& s) {
  OSPREY_CHECK(gpt2::train::checkAdamW(s.adamw, "train"));
  if (s.steps < 0) return Error{fmt::format("steps is {}: must be 0 or more", s.steps)};
  if (s.batch < 1 || s.seq < 1)
    return Error{fmt::format("a batch of {} x {} tokens: batch and seq must be 1 or more", s.batch, s.seq)};
  if (s.microBatch < 0 || (s.microBatch > 0 && s.batch % s.microBatch != 0))
    return Error{fmt::format("micro_batch {} must divide batch {}", s.microBatch, s.batch)};
  if (s.valEvery < 0 || s.valBatches < 0)
    return Error{fmt::format("val_every {} and val_batches {} must be 0 or more", s.valEvery, s.valBatches)};
  return {};
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<TrainOutcome> trainLoop(Gpt2Session& session, TrainingData& data, const TrainSettings& st,
                               const Progress& progress) {
  OSPREY_CHECK(checkSettings(st));
  const auto& train = data.split->train;
  const auto& val = data.split->val;
  auto stream = OSPREY_TRY(gpt2::data::BatchStream::create(train, st.batch, st.seq, "training", data.source));
  OSPREY_CHECK(stream.seek(data.position, data.epoch));

  TrainOutcome out;
  const Index valBatches =
      st.valEvery > 0 ? gpt2::train::validationBatchesAvailable(val.size(), st.batch, st.seq, st.valBatches) : 0;
  if (st.valEvery > 0 && valBatches == 0)
    out.notes.push_back(fmt::format("validation skipped: the validation split ({} tokens) is shorter than one "
                                    "batch of {} x {} + 1",
                                    val.size(), st.batch, st.seq));
  const Index firstStep = session.optimizerSteps(), lastStep = firstStep + st.steps;
  for (Index step = firstStep; step < lastStep;) {
    const auto start = std::chrono::steady_clock::now();
    const gpt2::data::Batch batch = stream.next();
    const StepReport report = OSPREY_TRY(session.trainStep(batch, st.microBatch, st.adamw, false));
    step = report.step;
    // Where the next step starts: kept even if what follows stops the run.
    data.position = stream.position();
    data.epoch = stream.epoch();
    const double seconds = secondsSince(start);
    StepRecord record{step, lastStep, report.loss, std::nullopt, seconds,
                      static_cast<double>(st.batch * st.seq) / seconds};
    if (valBatches > 0 && (step % st.valEvery == 0 || step == lastStep)) {
      const Scalar v = OSPREY_TRY(session.validationLoss(val, st.batch, st.seq, valBatches));
      if (!std::isfinite(v)) return Error{fmt::format("step {}: the validation loss is {}", step, gpt2::train::shown(v))};
      record.valLoss = v;
    }
    out.steps.push_back(record);
    if (progress && !OSPREY_TRY(progress(record))) break;
  }
  return out;
}

}  // namespace osprey::python
