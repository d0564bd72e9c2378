// GPT-2 in Python (osprey._osprey.Gpt2Model and its data types; python/osprey/gpt2.py is the face
// users call). The model is chosen as the CLI chooses it (gpt2/checkpoint/find.hpp), its handler
// as the CLI chooses one (gpt2_open.cpp), and every call runs the CLI's functions on it
// (gpt2_session_on.hpp, gpt2_training.cpp). Failures raise osprey.OspreyError with the CLI's
// message; the GIL is released while the model computes, and callbacks take it back.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "gpt2/checkpoint/find.hpp"
#include "gpt2/checkpoint/overwrite.hpp"
#include "gpt2/checkpoint/save.hpp"
#include "gpt2/model/config.hpp"
#include "gpt2/sampling/sampling.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/limits.hpp"
#include "gpt2_session.hpp"
#include "gpt2_training.hpp"
#include "osprey/io/dtype.hpp"
#include "python_callback.hpp"
#include "python_results.hpp"

namespace osprey::python {
namespace {

namespace fs = std::filesystem;

// One loaded model: its handler-held weights, its tokenizer, and how the CLI would announce it.
struct Gpt2Model {
  std::unique_ptr<Gpt2Session> session;
  gpt2::Tokenizer tokenizer;
  fs::path tokenizerDir;
  std::string label;   // "124M", "tiny": `gpt2 (<label>) on <device>`
  std::string notice;  // what the CLI prints on stderr when no checkpoint was read
};

// What load()'s first argument names: a path that exists is read; a size name ("124M", "tiny")
// is that preset's initialisation; anything else is the CLI's --model (a Hugging Face name, read
// from the cache, or a path that does not exist, which is the CLI's error).
gpt2::ModelRequest modelRequest(const std::optional<std::string>& model, const std::optional<std::string>& preset,
                                std::uint64_t seed) {
  gpt2::ModelRequest request{model, preset, seed};
  std::error_code ec;
  if (model && !preset && !fs::exists(*model, ec))
    if (const gpt2::Preset* p = gpt2::presetEntry(*model); p && *model == p->name) {
      request.model.reset();
      request.preset = *model;
    }
  return request;
}

Gpt2Model load(const std::optional<std::string>& model, const std::optional<std::string>& preset, std::uint64_t seed,
               const std::string& backend, const std::optional<std::string>& device,
               const std::optional<std::string>& products) {
  const SessionChoice choice{backend, device.value_or(""), products.value_or("")};
  if (device && device->empty()) raiseError(Error{"an empty device name: choose host, cuda or opencl"});
  checkOrRaise(checkSessionChoice(choice));  // as the CLI: a bad choice before any model is read
  auto made = [&]() -> Result<Gpt2Model> {
    py::gil_scoped_release unlocked;
    auto chosen = OSPREY_TRY(gpt2::chooseModel(modelRequest(model, preset, seed)));
    auto tokenizerDir = OSPREY_TRY(gpt2::findTokenizerDir(chosen.directory));
    auto tokenizer = OSPREY_TRY(gpt2::Tokenizer::load(tokenizerDir));
    auto session = OSPREY_TRY(openGpt2Session(choice, chosen.weights));
    return Gpt2Model{std::move(session), std::move(tokenizer), std::move(tokenizerDir), chosen.label, chosen.notice};
  }();
  return valueOrRaise(std::move(made));
}

// Runs work() without the GIL; raises its Error, or the exception a callback raised during it.
template <class Work>
auto unlocked(Work&& work, PythonCallback* callback = nullptr) {
  auto result = [&] {
    py::gil_scoped_release released;
    return work();
  }();
  if (callback) callback->rethrowIfRaised();
  return valueOrRaise(std::move(result));
}

std::vector<int> encode(const Gpt2Model& m, py::handle text) {
  if (!py::isinstance<py::bytes>(text) && !py::isinstance<py::str>(text))
    throw py::type_error("encode: takes a str (encoded as UTF-8) or bytes");
  const std::string bytes = text.cast<std::string>();
  return unlocked([&] { return m.tokenizer.encode(bytes); });
}

std::vector<int> generate(Gpt2Model& m, const std::vector<int>& prompt, Index tokens, double temperature, Index topK,
                          double topP, std::uint64_t seed, py::object onToken) {
  const gpt2::sampling::SamplingSettings sampling{temperature, topK, topP, seed};
  checkOrRaise(gpt2::sampling::checkSampling(sampling));
  PythonCallback callback(std::move(onToken));
  return unlocked(
      [&] {
        return m.session->generate(prompt, tokens, sampling, [&](int id) -> Result<void> {
          if (callback.empty()) return {};
          // Generation goes on whatever the callable answers; it stops it by raising.
          if (auto called = callback.call([id] { return py::int_(id); }); !called.ok()) return called.error();
          return {};
        });
      },
      &callback);
}

SharedBuffer logits(Gpt2Model& m, const std::vector<int>& ids, bool everyPosition) {
  auto values = std::make_shared<std::vector<Scalar>>(unlocked([&] { return m.session->logits(ids, everyPosition); }));
  // The values become a host Buffer without a copy: the Buffer holds the vector.
  auto host = valueOrRaise(openHostDevice());
  Scalar* at = values->empty() ? nullptr : values->data();
  const auto n = static_cast<Index>(values->size());
  return valueOrRaise(host->borrow(at, n, std::shared_ptr<const void>(values)));
}

gpt2::data::Batch makeBatch(std::vector<gpt2::data::TokenId> inputs, std::vector<gpt2::data::TokenId> targets, Index B,
                            Index T) {
  gpt2::data::Batch b{B, T, std::move(inputs), std::move(targets)};
  const auto n = static_cast<std::size_t>(B < 0 || T < 0 ? 0 : B * T);
  if (B < 1 || T < 1 || b.inputs.size() != n || b.targets.size() != n)
    raiseError(Error{fmt::format("a {} x {} batch must hold {} inputs and targets (has {} and {})", B, T, B * T,
                                 b.inputs.size(), b.targets.size())});
  return b;
}

gpt2::AdamWSettings adamwSettings(double lr, double beta1, double beta2, double eps, double weightDecay) {
  gpt2::AdamWSettings s;
  s.lr = lr;
  s.beta1 = beta1;
  s.beta2 = beta2;
  s.eps = eps;
  s.weightDecay = weightDecay;
  return s;
}

py::dict trainStep(Gpt2Model& m, const gpt2::data::Batch& batch, Index microBatch, double lr, double beta1,
                   double beta2, double eps, double weightDecay, bool gradSums) {
  const auto adamw = adamwSettings(lr, beta1, beta2, eps, weightDecay);
  checkOrRaise(gpt2::train::checkAdamW(adamw, "train_step"));
  const StepReport report = unlocked([&] { return m.session->trainStep(batch, microBatch, adamw, gradSums); });
  py::dict sums;
  const auto specs = gpt2::parameterSpecs(m.session->config());
  for (std::size_t i = 0; i < report.gradSums.size(); ++i) sums[py::str(specs[i].name)] = report.gradSums[i];
  py::dict out;
  out["loss"] = report.loss;
  out["step"] = report.step;
  out["grad_sums"] = sums;
  return out;
}

py::dict stepRecord(const StepRecord& r) {
  py::dict d;
  d["step"] = r.step;
  d["last_step"] = r.lastStep;
  d["loss"] = r.loss;
  d["val_loss"] = r.valLoss ? py::object(py::float_(*r.valLoss)) : py::object(py::none());
  d["seconds"] = r.seconds;
  d["tokens_per_second"] = r.tokensPerSecond;
  return d;
}

py::dict train(Gpt2Model& m, TrainingData& data, Index steps, Index batch, Index seq, Index microBatch, double lr,
               double beta1, double beta2, double eps, double weightDecay, Index valEvery, Index valBatches,
               py::object progress) {
  TrainSettings settings{steps, batch, seq, microBatch, valEvery, valBatches, adamwSettings(lr, beta1, beta2, eps, weightDecay)};
  PythonCallback callback(std::move(progress));
  // None (no answer) goes on; False stops after this step.
  const Progress report = [&](const StepRecord& record) -> Result<bool> {
    if (callback.empty()) return true;
    return callback.call([&] { return stepRecord(record); });
  };
  const TrainOutcome outcome = unlocked([&] { return trainLoop(*m.session, data, settings, report); }, &callback);
  py::list records;
  for (const StepRecord& r : outcome.steps) records.append(stepRecord(r));
  py::dict out;
  out["steps"] = records;
  out["notes"] = outcome.notes;
  return out;
}

void save(Gpt2Model& m, const fs::path& dir, const std::string& dtypeName, bool overwrite) {
  // The CLI's `init --dtype` names.
  const auto dtype = dtypeName == "f32"    ? std::optional(io::DType::F32)
                     : dtypeName == "f64"  ? std::optional(io::DType::F64)
                     : dtypeName == "bf16" ? std::optional(io::DType::BF16)
                                           : std::nullopt;
  if (!dtype) raiseError(Error{fmt::format("dtype `{}`: choose f32, f64 or bf16", dtypeName)});
  unlocked([&]() -> Result<bool> {
    if (!overwrite) OSPREY_CHECK(gpt2::refuseToReplaceModel(dir, "save"));
    const auto weights = OSPREY_TRY(m.session->hostWeights());
    OSPREY_CHECK(gpt2::saveHfDirectory(dir, weights, *dtype, m.tokenizerDir));
    return true;
  });
}

py::dict configDict(const gpt2::Config& c) {
  py::dict d;
  d["max_seq_len"] = c.maxT;
  d["vocab_size"] = c.V;
  d["num_layers"] = c.L;
  d["num_heads"] = c.NH;
  d["channels"] = c.C;
  return d;
}

// Batches of a token split, as the CLI cuts them (data_batches.hpp); holds the tokens it reads.
struct BatchIterator {
  std::shared_ptr<const gpt2::data::TokenSplit> split;
  gpt2::data::BatchStream stream;
};

BatchIterator batches(const TrainingData& data, Index B, Index T, const std::string& which) {
  if (which != "train" && which != "val") raiseError(Error{fmt::format("split `{}`: choose train or val", which)});
  const auto& tokens = which == "train" ? data.split->train : data.split->val;
  auto stream = valueOrRaise(gpt2::data::BatchStream::create(tokens, B, T, which == "train" ? "training" : "validation",
                                                             data.source));
  return BatchIterator{data.split, std::move(stream)};
}

}  // namespace

void bindGpt2(py::module_& m) {
  py::class_<gpt2::data::Batch>(m, "Batch",
                                "B rows of T input tokens and their next-token targets (row-major lists of ids).")
      .def(py::init(&makeBatch), py::arg("inputs"), py::arg("targets"), py::arg("B"), py::arg("T"))
      .def_readonly("B", &gpt2::data::Batch::B)
      .def_readonly("T", &gpt2::data::Batch::T)
      .def_readonly("inputs", &gpt2::data::Batch::inputs)
      .def_readonly("targets", &gpt2::data::Batch::targets)
      .def("__repr__", [](const gpt2::data::Batch& b) { return fmt::format("osprey.gpt2.Batch({} x {})", b.B, b.T); });

  py::class_<BatchIterator>(m, "BatchIterator")
      .def("__iter__", [](BatchIterator& it) -> BatchIterator& { return it; })
      .def("__next__", [](BatchIterator& it) { return it.stream.next(); })
      .def_property_readonly("position", [](const BatchIterator& it) { return it.stream.position(); });

  py::class_<TrainingData>(m, "TrainingData", "A training run's tokens, made ready once (gpt2/train/data.hpp).")
      .def_property_readonly("train_tokens", [](const TrainingData& d) { return d.split->train.size(); })
      .def_property_readonly("val_tokens", [](const TrainingData& d) { return d.split->val.size(); })
      .def_readonly("source", &TrainingData::source)
      .def_readonly("sha256", &TrainingData::sha256)
      .def_readonly("note", &TrainingData::note)
      .def_readwrite("position", &TrainingData::position)
      .def_readwrite("epoch", &TrainingData::epoch)
      .def("batches", &batches, py::arg("batch"), py::arg("seq"), py::arg("split") = "train",
           "Batches of batch x seq from the start of a split, as the CLI cuts them (wrapping at the end).");

  py::class_<Gpt2Model>(m, "Gpt2Model")
      .def_static("load", &load, py::arg("model") = py::none(), py::kw_only(), py::arg("preset") = py::none(),
                  py::arg("seed") = gpt2::kDefaultSeed, py::arg("backend") = "lists", py::arg("device") = py::none(),
                  py::arg("products") = py::none())
      .def_property_readonly("device", [](const Gpt2Model& g) { return g.session->device(); })
      .def_readonly("label", &Gpt2Model::label)
      .def_readonly("notice", &Gpt2Model::notice)
      .def_readonly("tokenizer_dir", &Gpt2Model::tokenizerDir)
      .def_property_readonly("config", [](const Gpt2Model& g) { return configDict(g.session->config()); })
      .def_property_readonly("steps", [](const Gpt2Model& g) { return g.session->optimizerSteps(); })
      .def_property_readonly("parameter_names",
                             [](const Gpt2Model& g) {
                               std::vector<std::string> names;
                               for (const auto& s : gpt2::parameterSpecs(g.session->config())) names.push_back(s.name);
                               return names;
                             })
      .def("encode", &encode, py::arg("text"))
      .def("decode",
           [](const Gpt2Model& g, const std::vector<int>& ids) {
             return py::bytes(unlocked([&] { return g.tokenizer.decode(ids); }));
           })
      .def("token_bytes",
           [](const Gpt2Model& g, int id) { return py::bytes(valueOrRaise(g.tokenizer.tokenText(id))); })
      .def("generate", &generate, py::arg("prompt"), py::arg("tokens"), py::arg("temperature") = 0.0,
           py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("seed") = gpt2::kDefaultSeed,
           py::arg("on_token") = py::none())
      .def("logits", &logits, py::arg("ids"), py::arg("every_position") = false)
      .def("loss", [](Gpt2Model& g, const gpt2::data::Batch& b) { return unlocked([&] { return g.session->loss(b); }); })
      .def("train_step", &trainStep, py::arg("batch"), py::kw_only(), py::arg("micro_batch") = 0,
           py::arg("lr") = 1e-3, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999, py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 0.0, py::arg("grad_sums") = true)
      .def(
          "training_data",
          [](const Gpt2Model& g, const std::string& path, const std::optional<std::string>& valPath,
             const std::optional<std::string>& cacheDir) {
            return unlocked([&] {
              return prepareTrainingData(path, valPath, cacheDir, g.tokenizer, g.tokenizerDir, g.session->config().V);
            });
          },
          py::arg("path"), py::kw_only(), py::arg("val_path") = py::none(), py::arg("cache_dir") = py::none())
      .def("train", &train, py::arg("data"), py::arg("steps"), py::kw_only(), py::arg("batch") = 4,
           py::arg("seq") = 64, py::arg("micro_batch") = 0, py::arg("lr") = 1e-3, py::arg("beta1") = 0.9,
           py::arg("beta2") = 0.999, py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0, py::arg("val_every") = 0,
           py::arg("val_batches") = 8, py::arg("progress") = py::none())
      .def("save", &save, py::arg("dir"), py::kw_only(), py::arg("dtype") = "f32", py::arg("overwrite") = false);
}

}  // namespace osprey::python
