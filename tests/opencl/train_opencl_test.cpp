// A GPT-2 training step on the opencl device: the loss, every gradient and the weights after one
// AdamW step (with weight decay) equal lists' bit for bit.
#include <gtest/gtest.h>

#include "gpt2/train/adamw.hpp"
#include "handlers.hpp"
#include "train/train_helpers.hpp"

namespace osprey::testing::train {
namespace {

TEST(TrainStepOnOpenCl, ListsAndOpenClAgreeBitForBit) {
  auto lists = makeHandler<Lists>();
  auto opencl = makeHandler<GpuOpenCl>();
  const gpt2::HostWeights w = smallWeights();
  const gpt2::data::Batch batch = smallBatch(3, 7, kSmall.V);
  auto wa = *gpt2::upload(lists, w);
  auto wb = *gpt2::upload(opencl, w);
  const auto [a, b] = gradientsAgreeBitForBit(lists, wa, opencl, wb, batch);
  const auto specs = gpt2::parameterSpecs(kSmall);
  gpt2::AdamWSettings s = gpt2::train::defaultAdamW();
  s.weightDecay = 0.1;
  auto ua = *gpt2::train::adamwStep(lists, wa, *gpt2::train::freshOptimizer(lists, wa), a.grads, s);
  auto ub = *gpt2::train::adamwStep(opencl, wb, *gpt2::train::freshOptimizer(opencl, wb), b.grads, s);
  const auto pa = allValues(lists, ua.weights), pb = allValues(opencl, ub.weights);
  ASSERT_EQ(pa.size(), specs.size());
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(sameBits(pa[i], pb[i])) << specs[i].name;
}

}  // namespace
}  // namespace osprey::testing::train
