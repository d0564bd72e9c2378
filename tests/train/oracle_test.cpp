// The training step against the PyTorch float64 oracle (tools/oracle/gpt2_train.py): the loss,
// every element of every gradient, the parameters after one AdamW step, and the losses of ten
// steps on the same batch, on every host handler.
//
// The golden file holds its own inputs (weights and tokens drawn by the oracle), so it depends on
// nothing Osprey computes. Tolerance: |ours - oracle| <= 1e-9·|oracle| + 1e-13·max|oracle| over
// the tensor (the second term only matters for elements that cancel to almost nothing, where a
// relative error is not meaningful in either float64 implementation).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "gpt2/train/adamw.hpp"
#include "gpt2/train/step.hpp"
#include "handlers.hpp"
#include "osprey/io/safetensors.hpp"

namespace {

using namespace gpt2;
using namespace gpt2::train;
using osprey::Index;
using osprey::Scalar;

const std::string kGolden = std::string(OSPREY_SOURCE_DIR) + "/tests/golden/gpt2_train_tiny.safetensors";
const char* kRegenerate =
    "tests/golden/gpt2_train_tiny.safetensors is missing: regenerate it with "
    "`python3 tools/oracle/gpt2_train.py --out tests/golden/gpt2_train_tiny.safetensors` "
    "(needs PyTorch; Debian: apt-get install python3-torch, then /usr/bin/python3)";

// Everything the golden file says.
struct Golden {
  Config config;
  data::Batch batch;
  AdamWSettings adamw;
  Index steps = 0;
  HostWeights params;
  HostWeights grads;
  HostWeights step1;
  Scalar loss = 0.0;
  std::vector<Scalar> losses;
};

Scalar number(const std::map<std::string, std::string>& meta, const std::string& key) {
  auto it = meta.find(key);
  if (it == meta.end()) throw std::runtime_error("golden metadata lacks " + key);
  return std::strtod(it->second.c_str(), nullptr);  // Python's repr round-trips exactly
}

HostWeights readSet(const osprey::io::SafetensorsFile& f, const Config& c, const std::string& prefix) {
  HostWeights w{c, {}};
  for (const ParameterSpec& spec : parameterSpecs(c)) {
    auto t = f.read(prefix + spec.name);
    if (!t.ok()) throw std::runtime_error(t.error().message);
    w.tensors.push_back(HostTensor{std::move(t->values)});
  }
  return w;
}

Golden readGolden() {
  auto f = osprey::io::SafetensorsFile::open(kGolden);
  if (!f.ok()) throw std::runtime_error(f.error().message);
  const auto& meta = f->metadata();
  Golden g;
  g.config = Config{static_cast<Index>(number(meta, "n_positions")), static_cast<Index>(number(meta, "vocab_size")),
                    static_cast<Index>(number(meta, "n_layer")), static_cast<Index>(number(meta, "n_head")),
                    static_cast<Index>(number(meta, "n_embd"))};
  g.adamw.lr = number(meta, "lr");
  g.adamw.beta1 = number(meta, "beta1");
  g.adamw.beta2 = number(meta, "beta2");
  g.adamw.eps = number(meta, "eps");
  g.adamw.weightDecay = number(meta, "weight_decay");
  g.steps = static_cast<Index>(number(meta, "steps"));
  const Index B = static_cast<Index>(number(meta, "batch")), T = static_cast<Index>(number(meta, "seq"));
  auto tokens = f->read("tokens");
  if (!tokens.ok()) throw std::runtime_error(tokens.error().message);
  g.batch.B = B;
  g.batch.T = T;
  for (Index b = 0; b < B; ++b)
    for (Index t = 0; t < T; ++t) {
      g.batch.inputs.push_back(static_cast<data::TokenId>(tokens->values[b * (T + 1) + t]));
      g.batch.targets.push_back(static_cast<data::TokenId>(tokens->values[b * (T + 1) + t + 1]));
    }
  g.params = readSet(*f, g.config, "param.");
  g.grads = readSet(*f, g.config, "grad.");
  g.step1 = readSet(*f, g.config, "step1.");
  g.loss = f->read("loss")->values.at(0);
  g.losses = f->read("losses")->values;
  return g;
}

// "" when every element of ours is within tolerance of the oracle, else what differs most.
std::string compareTensor(const std::string& name, const std::vector<Scalar>& ours,
                          const std::vector<Scalar>& oracle) {
  if (ours.size() != oracle.size())
    return name + ": " + std::to_string(ours.size()) + " elements vs the oracle's " + std::to_string(oracle.size());
  Scalar scale = 0.0;
  for (Scalar x : oracle) scale = std::max(scale, std::fabs(x));
  std::size_t worst = 0;
  Scalar worstExcess = 0.0;
  bool bad = false;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const Scalar allowed = 1e-9 * std::fabs(oracle[i]) + 1e-13 * scale;
    const Scalar diff = std::fabs(ours[i] - oracle[i]);
    if (!(diff <= allowed)) {
      const Scalar excess = allowed > 0 ? diff / allowed : diff;
      if (!bad || excess > worstExcess) worst = i, worstExcess = excess;
      bad = true;
    }
  }
  if (!bad) return "";
  return fmt::format("{}[{}]: ours {:.17g} vs oracle {:.17g} ({:.3g}x the tolerance)", name, worst, ours[worst],
                     oracle[worst], worstExcess);
}

template <class H>
std::vector<Scalar> hostValues(H& h, const typename H::Buffer& b) {
  std::vector<Scalar> out(static_cast<std::size_t>(h.length(b)));
  for (Index i = 0; i < h.length(b); ++i) out[static_cast<std::size_t>(i)] = h.get(b, i);
  return out;
}

// The whole comparison for handler H; returns the list of mismatches.
template <class H>
std::vector<std::string> compareWithOracle(const Golden& g) {
  H h = osprey::testing::makeHandler<H>();
  std::vector<std::string> problems;
  const auto specs = parameterSpecs(g.config);
  auto w = upload(h, g.params);
  if (!w.ok()) return {w.error().message};
  auto grads = batchGradients(h, *w, g.batch, 0);
  if (!grads.ok()) return {grads.error().message};
  if (!(std::fabs(grads->loss - g.loss) <= 1e-9 * std::fabs(g.loss)))
    problems.push_back(fmt::format("loss: ours {:.17g} vs oracle {:.17g}", grads->loss, g.loss));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto m = compareTensor("grad " + specs[i].name, hostValues(h, grads->grads.tensors[i]), g.grads.tensors[i].values);
    if (!m.empty()) problems.push_back(m);
  }
  auto state = freshOptimizer(h, *w);
  if (!state.ok()) return {state.error().message};
  auto next = adamwStep(h, *w, *state, grads->grads, g.adamw);
  if (!next.ok()) return {next.error().message};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto m = compareTensor("after one step " + specs[i].name, hostValues(h, next->weights.tensors[i]),
                           g.step1.tensors[i].values);
    if (!m.empty()) problems.push_back(m);
  }
  // Ten steps on the same batch: the loss before each.
  Params<H> weights = *w;
  OptimizerState<H> s = *state;
  for (Index k = 0; k < g.steps; ++k) {
    auto step = batchGradients(h, weights, g.batch, 0);
    if (!step.ok()) return {step.error().message};
    const Scalar want = g.losses[static_cast<std::size_t>(k)];
    if (!(std::fabs(step->loss - want) <= 1e-9 * std::fabs(want)))
      problems.push_back(fmt::format("loss before step {}: ours {:.17g} vs oracle {:.17g}", k + 1, step->loss, want));
    auto u = adamwStep(h, weights, s, step->grads, g.adamw);
    if (!u.ok()) return {u.error().message};
    weights = std::move(u->weights);
    s = std::move(u->state);
  }
  return problems;
}

template <class H>
class TrainOracle : public ::testing::Test {};
using HostHandlers = ::testing::Types<osprey::Lists, osprey::GpuHost>;
TYPED_TEST_SUITE(TrainOracle, HostHandlers);

TYPED_TEST(TrainOracle, LossGradientsStepAndTenLossesMatchPyTorch) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kRegenerate;
  Golden g;
  try {
    g = readGolden();
  } catch (const std::exception& e) {
    FAIL() << kGolden << ": " << e.what() << "\n" << kRegenerate;
  }
  ASSERT_EQ(g.losses.size(), static_cast<std::size_t>(g.steps));
  const auto problems = compareWithOracle<TypeParam>(g);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << problems.size() << " mismatches with the oracle:\n" << all;
}

}  // namespace
