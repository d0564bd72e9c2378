// Data-parallel training on simulated ranks (threads sharing memory, thread_rank_group.hpp):
// the exact gradient sum gives every rank, for any rank count, the weights of a one-process run
// with the same micro-batches, bit for bit; the all-reduce sum gives every rank the same weights;
// a batch that cannot be split is a clear error.
#include <gtest/gtest.h>

#include <thread>

#include "gpt2/train/adamw.hpp"
#include "gpt2/train/parallel_step.hpp"
#include "handlers.hpp"
#include "thread_rank_group.hpp"
#include "train_helpers.hpp"

namespace {

using namespace gpt2;
using namespace gpt2::train;
using namespace osprey::testing::train;
using osprey::Index;
using osprey::Scalar;

constexpr Index kB = 4, kT = 5, kSteps = 3;

data::Batch stepBatch(Index step) { return smallBatch(kB, kT, kSmall.V, static_cast<int>(step) * 7 + 1); }

AdamWSettings settings() {
  AdamWSettings s = defaultAdamW();
  s.weightDecay = 0.1;
  return s;
}

struct RunResult {
  std::vector<std::vector<Scalar>> weights;
  std::vector<Scalar> losses;
  std::string error;
};

// kSteps steps of one process (no ranks), micro-batches of `micro` rows.
template <class H>
RunResult oneProcess(Index micro) {
  H h = osprey::testing::makeHandler<H>();
  RunResult out;
  auto w = *upload(h, smallWeights());
  auto opt = *freshOptimizer(h, w);
  for (Index s = 0; s < kSteps; ++s) {
    auto g = batchGradients(h, w, stepBatch(s), micro);
    if (!g.ok()) return RunResult{{}, {}, g.error().message};
    out.losses.push_back(g->loss);
    auto next = *adamwStep(h, w, opt, g->grads, settings());
    w = std::move(next.weights);
    opt = std::move(next.state);
  }
  out.weights = allValues(h, w);
  return out;
}

// The same steps on `n` ranks, one thread each; every rank's result.
template <class H>
std::vector<RunResult> onRanks(int n, Index micro, GradientSum mode) {
  ThreadRankHub hub(n);
  std::vector<RunResult> results(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      H h = osprey::testing::makeHandler<H>();
      ThreadRankGroup<H> group(hub, r);
      RunResult& out = results[static_cast<std::size_t>(r)];
      auto w = *upload(h, smallWeights());
      auto opt = *freshOptimizer(h, w);
      for (Index s = 0; s < kSteps; ++s) {
        auto g = parallelBatchGradients(h, w, stepBatch(s), micro, group, mode);
        if (!g.ok()) {
          out.error = g.error().message;
          return;  // every rank fails the same check at the same point, so none is left waiting
        }
        out.losses.push_back(g->loss);
        auto next = *adamwStep(h, w, opt, g->grads, settings());
        w = std::move(next.weights);
        opt = std::move(next.state);
      }
      out.weights = allValues(h, w);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

bool sameRun(const RunResult& a, const RunResult& b) {
  if (a.weights.size() != b.weights.size() || !sameBits(a.losses, b.losses)) return false;
  for (std::size_t i = 0; i < a.weights.size(); ++i)
    if (!sameBits(a.weights[i], b.weights[i])) return false;
  return true;
}

template <class H>
class ParallelStep : public ::testing::Test {};
using Handlers = ::testing::Types<osprey::Lists, osprey::GpuHost>;
TYPED_TEST_SUITE(ParallelStep, Handlers);

// 1, 2 and 4 ranks with one-row micro-batches (so 4, 2 and 1 micro-batches a rank), and one
// process folding the same four micro-batches: the same losses and weights after three AdamW
// steps, bit for bit, on every rank.
TYPED_TEST(ParallelStep, ExactSumMatchesOneProcessForEveryRankCount) {
  const RunResult reference = oneProcess<TypeParam>(1);
  ASSERT_TRUE(reference.error.empty()) << reference.error;
  ASSERT_EQ(reference.weights.size(), static_cast<std::size_t>(parameterTensorCount(kSmall)));
  for (int n : {1, 2, 4}) {
    const auto ranks = onRanks<TypeParam>(n, 1, GradientSum::Exact);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(ranks[static_cast<std::size_t>(r)].error.empty()) << ranks[static_cast<std::size_t>(r)].error;
      EXPECT_TRUE(sameRun(ranks[static_cast<std::size_t>(r)], reference)) << n << " ranks, rank " << r;
    }
  }
  // And the default split (one micro-batch of B/N rows per rank) matches --micro-batch B/N.
  const RunResult halves = oneProcess<TypeParam>(2);
  const auto twoDefault = onRanks<TypeParam>(2, 0, GradientSum::Exact);
  EXPECT_TRUE(sameRun(twoDefault[0], halves));
  EXPECT_TRUE(sameRun(twoDefault[1], halves));
}

// The all-reduce sum: every rank the same weights; close to the exact result, since only the
// order of the additions differs.
TYPED_TEST(ParallelStep, AllReduceSumAgreesAcrossRanks) {
  const RunResult reference = oneProcess<TypeParam>(1);
  const auto ranks = onRanks<TypeParam>(4, 1, GradientSum::AllReduce);
  for (const auto& r : ranks) ASSERT_TRUE(r.error.empty()) << r.error;
  for (std::size_t r = 1; r < ranks.size(); ++r) EXPECT_TRUE(sameRun(ranks[r], ranks[0])) << "rank " << r;
  for (std::size_t t = 0; t < reference.weights.size(); ++t)
    for (std::size_t e = 0; e < reference.weights[t].size(); ++e)
      ASSERT_NEAR(ranks[0].weights[t][e], reference.weights[t][e], 1e-12) << t << "," << e;
}

TYPED_TEST(ParallelStep, UnevenSplitsAreClearErrors) {
  const auto three = onRanks<TypeParam>(3, 0, GradientSum::Exact);  // 4 rows over 3 ranks
  for (const auto& r : three) EXPECT_NE(r.error.find("cannot be split evenly over 3 ranks"), std::string::npos) << r.error;
  const auto badMicro = onRanks<TypeParam>(2, 3, GradientSum::Exact);  // 2 rows a rank, micro-batches of 3
  for (const auto& r : badMicro) EXPECT_NE(r.error.find("--micro-batch 3 must divide the 2 rows"), std::string::npos) << r.error;
}

TEST(RankShare, CutsTheGlobalBatch) {
  auto s = rankShare(16, 4, 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rows, 4);
  EXPECT_EQ(s->microRows, 2);
  EXPECT_EQ(s->microBatches, 2);
  auto d = rankShare(8, 8, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->microBatches, 1);
  EXPECT_FALSE(rankShare(8, 0, 0).ok());
}

// A transport that delivers the wrong number of values is an error, not a silent mix-up.
TEST(ThreadRankGroup, ShortTensorsAreErrors) {
  ThreadRankHub hub(2);
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      osprey::Lists h;
      ThreadRankGroup<osprey::Lists> group(hub, r);
      std::vector<osprey::Lists::Buffer> mine;
      const Scalar values[3] = {1, 2, 3};
      mine.push_back(*h.fromList(std::span<const Scalar>(values)));
      const Index sizes[1] = {4};
      auto got = group.broadcast(h, mine, sizes, 0, "test broadcast");
      if (!got.ok()) errors[r] = got.error().message;
    });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(errors[0].empty());
  EXPECT_NE(errors[1].find("test broadcast: tensor 0 has 3 values, 4 expected"), std::string::npos) << errors[1];
}

}  // namespace
