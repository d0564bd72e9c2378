// The training step itself: handlers agree bit for bit, gradients agree with finite differences,
// micro-batch gradients fold exactly, and AdamW decays only the 2-D tensors.
#include <gtest/gtest.h>

#include <cmath>

#include "gpt2/train/adamw.hpp"
#include "gpt2/train/step.hpp"
#include "handlers.hpp"
#include "train_helpers.hpp"

namespace {

using namespace gpt2;
using namespace gpt2::train;
using namespace osprey::testing::train;
using osprey::Index;
using osprey::Scalar;

template <class H>
StepGradients<H> gradientsOn(H& h, const HostWeights& host, const data::Batch& batch, Index micro) {
  auto w = upload(h, host);
  if (!w.ok()) throw std::runtime_error(w.error().message);
  auto g = batchGradients(h, *w, batch, micro);
  if (!g.ok()) throw std::runtime_error(g.error().message);
  return std::move(*g);
}

template <class H>
Scalar lossOn(H& h, const HostWeights& host, const data::Batch& batch) {
  auto w = upload(h, host);
  auto l = batchLoss(h, *w, batch);
  if (!l.ok()) throw std::runtime_error(l.error().message);
  return *l;
}

TEST(TrainStep, ListsAndGpuHostAgreeBitForBit) {
  auto lists = osprey::testing::makeHandler<osprey::Lists>();
  auto host = osprey::testing::makeHandler<osprey::GpuHost>();
  const HostWeights w = smallWeights();
  const data::Batch batch = smallBatch(3, 7, kSmall.V);
  auto wa = *upload(lists, w);
  auto wb = *upload(host, w);
  const auto [a, b] = gradientsAgreeBitForBit(lists, wa, host, wb, batch);
  ASSERT_EQ(a.grads.tensors.size(), static_cast<std::size_t>(parameterTensorCount(kSmall)));
  const auto specs = parameterSpecs(kSmall);

  // And after one AdamW step (with weight decay), the weights too.
  AdamWSettings s = defaultAdamW();
  s.weightDecay = 0.1;
  auto ua = *adamwStep(lists, wa, *freshOptimizer(lists, wa), a.grads, s);
  auto ub = *adamwStep(host, wb, *freshOptimizer(host, wb), b.grads, s);
  const auto pa = allValues(lists, ua.weights), pb = allValues(host, ub.weights);
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(sameBits(pa[i], pb[i])) << specs[i].name;
}

TEST(TrainStep, LossEqualsTheForwardOnlyLoss) {
  auto h = osprey::testing::makeHandler<osprey::GpuHost>();
  const HostWeights w = smallWeights();
  const data::Batch batch = smallBatch(2, 9, kSmall.V);
  auto g = gradientsOn(h, w, batch, 0);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(g.loss), std::bit_cast<std::uint64_t>(lossOn(h, w, batch)));
  // A freshly initialised model predicts roughly uniformly: loss near ln V.
  EXPECT_NEAR(g.loss, std::log(static_cast<double>(kSmall.V)), 0.5);
}

// Central differences on a handful of elements of every kind of tensor.
TEST(TrainStep, GradientsMatchFiniteDifferences) {
  auto h = osprey::testing::makeHandler<osprey::Lists>();
  const HostWeights w = smallWeights();
  const data::Batch batch = smallBatch(2, 5, kSmall.V);
  auto g = gradientsOn(h, w, batch, 0);
  const auto grads = allValues(h, g.grads);
  const auto specs = parameterSpecs(kSmall);
  const Index L = kSmall.L;
  const std::vector<std::pair<Index, Index>> probes = {
      {kWteIndex, batch.inputs[0] * kSmall.C + 3},  // a row the batch reads (and the lm head)
      {kWteIndex, 63 * kSmall.C + 1},               // a row only the lm head reads
      {kWpeIndex, 2 * kSmall.C + 5},
      {blockTensorIndex(0, BlockSlot::Ln1Weight), 4},
      {blockTensorIndex(0, BlockSlot::Ln1Bias), 9},
      {blockTensorIndex(0, BlockSlot::AttnWeight), 5 * 3 * kSmall.C + 20},   // a key column
      {blockTensorIndex(1, BlockSlot::AttnWeight), 2 * 3 * kSmall.C + 3},    // a query column
      {blockTensorIndex(1, BlockSlot::AttnBias), 2 * kSmall.C + 7},          // a value bias
      {blockTensorIndex(1, BlockSlot::AttnProjWeight), 37},
      {blockTensorIndex(0, BlockSlot::AttnProjBias), 2},
      {blockTensorIndex(1, BlockSlot::Ln2Weight), 11},
      {blockTensorIndex(0, BlockSlot::Ln2Bias), 0},
      {blockTensorIndex(0, BlockSlot::FcWeight), 100},
      {blockTensorIndex(1, BlockSlot::FcBias), 33},
      {blockTensorIndex(1, BlockSlot::FcProjWeight), 500},
      {blockTensorIndex(L - 1, BlockSlot::FcProjBias), 15},
      {lnfWeightIndex(kSmall), 6},
      {lnfBiasIndex(kSmall), 12},
  };
  const Scalar step = 1e-5;
  for (const auto& [tensor, element] : probes) {
    HostWeights plus = w, minus = w;
    plus.tensors[static_cast<std::size_t>(tensor)].values[static_cast<std::size_t>(element)] += step;
    minus.tensors[static_cast<std::size_t>(tensor)].values[static_cast<std::size_t>(element)] -= step;
    const Scalar numeric = (lossOn(h, plus, batch) - lossOn(h, minus, batch)) / (2 * step);
    const Scalar analytic = grads[static_cast<std::size_t>(tensor)][static_cast<std::size_t>(element)];
    EXPECT_NEAR(analytic, numeric, 1e-6 * std::fabs(numeric) + 1e-9)
        << specs[static_cast<std::size_t>(tensor)].name << "[" << element << "]";
    EXPECT_NE(analytic, 0.0) << specs[static_cast<std::size_t>(tensor)].name << "[" << element
                             << "]: a probe should see a non-zero gradient";
  }
}

// The global-batch gradient is the fold of micro-batch gradients in order, wherever each one was
// computed: here micro-batch 0 on lists and 1 on gpu/host, as two devices would.
TEST(TrainStep, MicroBatchGradientsFoldExactlyAcrossHandlers) {
  auto lists = osprey::testing::makeHandler<osprey::Lists>();
  auto host = osprey::testing::makeHandler<osprey::GpuHost>();
  const HostWeights w = smallWeights();
  const data::Batch batch = smallBatch(4, 6, kSmall.V, 3);
  auto whole = gradientsOn(host, w, batch, 2);  // two micro-batches of 2 rows, folded on one handler

  auto w0 = *upload(lists, w);
  auto w1 = *upload(host, w);
  auto g0 = microBatchGradients(lists, w0, data::batchRows(batch, 0, 2), 4);
  auto g1 = microBatchGradients(host, w1, data::batchRows(batch, 2, 2), 4);
  ASSERT_TRUE(g0.ok() && g1.ok());
  auto g0OnHost = *upload(host, HostWeights{kSmall, [&] {
    std::vector<HostTensor> t;
    for (auto& v : allValues(lists, g0->grads)) t.push_back(HostTensor{v});
    return t;
  }()});
  auto folded = addGradients(host, g0OnHost, g1->grads);
  ASSERT_TRUE(folded.ok());
  const Scalar loss = (g0->lossSum + g1->lossSum) / 24.0;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(loss), std::bit_cast<std::uint64_t>(whole.loss));
  const auto a = allValues(host, *folded), b = allValues(host, whole.grads);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(sameBits(a[i], b[i])) << i;

  // Micro-batching changes only the order of additions: the same gradient to rounding.
  auto once = gradientsOn(host, w, batch, 0);
  const auto c = allValues(host, once.grads);
  for (std::size_t i = 0; i < c.size(); ++i)
    for (std::size_t j = 0; j < c[i].size(); ++j) ASSERT_NEAR(b[i][j], c[i][j], 1e-12) << i << "," << j;
  EXPECT_NEAR(once.loss, whole.loss, 1e-13);
  EXPECT_FALSE(batchGradients(host, w1, batch, 3).ok());  // 3 does not divide 4
}

TEST(TrainStep, WeightDecayOnlyOnMatrices) {
  const Config c = kSmall;
  for (Index i = 0; i < parameterTensorCount(c); ++i) {
    const auto spec = parameterSpecs(c)[static_cast<std::size_t>(i)];
    EXPECT_EQ(decaysTensor(c, i), spec.shape.size() == 2) << spec.name;
  }
}

TEST(TrainStep, BadBatchesAreClearErrors) {
  auto h = osprey::testing::makeHandler<osprey::Lists>();
  auto w = *upload(h, smallWeights());
  data::Batch tooLong = smallBatch(1, kSmall.maxT + 1, kSmall.V);
  auto r = batchGradients(h, w, tooLong, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("context"), std::string::npos) << r.error().message;
  data::Batch badId = smallBatch(1, 4, kSmall.V);
  badId.targets[2] = static_cast<data::TokenId>(kSmall.V);
  auto s = batchGradients(h, w, badId, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("vocabulary"), std::string::npos) << s.error().message;
}

}  // namespace
