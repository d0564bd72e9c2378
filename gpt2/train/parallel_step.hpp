// The training step's loss and gradient when the global batch is spread over ranks
// (train_ranks.hpp), written once over the handler and the rank group.
//
// Rank r of N takes rows [r·B/N, (r+1)·B/N) of the global batch of B rows and cuts them into
// micro-batches of M rows (default: one micro-batch of B/N rows). With K = B/(N·M) micro-batches
// per rank, rank r's j-th micro-batch is the global micro-batch k = r·K + j: the same rows, and so
// the same gradient, as micro-batch k of a one-process run with --micro-batch M.
//
//   GradientSum::Exact      for k = 0, 1, ... in order, k's owner broadcasts its loss sum and
//                           gradient and every rank folds it in (GradientFold, train_step.hpp).
//                           Every rank ends with the one-process result bit for bit, whether
//                           the run has 1, 2, 4 or 8 ranks, as long as M is the same.
//   GradientSum::AllReduce  each rank folds its own micro-batches, then the transport sums the
//                           ranks' results in its own order: one collective per step instead of
//                           N·K broadcasts, equal on every rank but not across rank counts.
#pragma once

#include <span>
#include <vector>

#include <fmt/format.h>

#include "gpt2/train/ranks.hpp"
#include "gpt2/train/step.hpp"

namespace gpt2::train {

// Rows per rank and micro-batches per rank for a global batch of B rows on N ranks.
struct RankShare {
  Index rows = 0;        // B / N
  Index microRows = 0;   // M
  Index microBatches = 0;  // K = rows / M
};

inline osprey::Result<RankShare> rankShare(Index B, int N, Index microRows) {
  if (N < 1) return osprey::Error{fmt::format("{} ranks: there must be at least one", N)};
  if (B % N != 0)
    return osprey::Error{fmt::format("--batch {} cannot be split evenly over {} ranks: choose a multiple of {}", B, N, N)};
  RankShare s;
  s.rows = B / N;
  s.microRows = microRows == 0 ? s.rows : microRows;
  if (s.microRows < 1 || s.rows % s.microRows != 0) {
    if (N == 1) return osprey::Error{fmt::format("--micro-batch {} must divide --batch {}", microRows, B)};
    return osprey::Error{fmt::format("--micro-batch {} must divide the {} rows each of the {} ranks takes from "
                                     "--batch {}", microRows, s.rows, N, B)};
  }
  s.microBatches = s.rows / s.microRows;
  return s;
}

// x as a one-element tensor (how a loss sum travels with the gradients).
template <osprey::Tensor H>
osprey::Result<Buf<H>> oneValue(H& h, Scalar x) {
  const Scalar values[1] = {x};
  return h.fromList(std::span<const Scalar>(values));
}

template <osprey::Tensor H>
osprey::Result<StepGradients<H>> parallelBatchGradients(H& h, const Params<H>& w, const data::Batch& batch,
                                                        Index microRows, RankGroup<H>& ranks, GradientSum mode,
                                                        LayerClock* clock = nullptr) {
  const RankShare share = OSPREY_TRY(rankShare(batch.B, ranks.size(), microRows));
  const Index first = static_cast<Index>(ranks.rank()) * share.rows;
  std::vector<MicroBatchGradients<H>> mine;
  mine.reserve(static_cast<std::size_t>(share.microBatches));
  for (Index j = 0; j < share.microBatches; ++j)
    mine.push_back(OSPREY_TRY(microBatchGradients(
        h, w, data::batchRows(batch, first + j * share.microRows, share.microRows), batch.B, clock)));

  GradientFold<H> fold;
  if (mode == GradientSum::AllReduce) {
    for (auto& part : mine) OSPREY_CHECK(fold.add(h, std::move(part)));
    std::vector<Buf<H>> tensors = std::move(fold.grads.tensors);
    tensors.push_back(OSPREY_TRY(oneValue(h, fold.lossSum)));
    auto summed = OSPREY_TRY(ranks.allReduceSum(h, tensors, "all-reduce of the step's gradients"));
    fold.lossSum = h.get(summed.back(), 0);
    summed.pop_back();
    fold.grads.tensors = std::move(summed);
    return fold.finish(batch.B, batch.T);
  }

  // Exact: every micro-batch's term travels on its own, in global order. The loss sum rides
  // along as a one-element tensor after the gradients.
  std::vector<Index> sizes;
  for (const Buf<H>& t : w.tensors) sizes.push_back(h.length(t));
  sizes.push_back(1);
  for (int owner = 0; owner < ranks.size(); ++owner) {
    for (Index j = 0; j < share.microBatches; ++j) {
      std::vector<Buf<H>> term;
      if (owner == ranks.rank()) {
        auto& part = mine[static_cast<std::size_t>(j)];
        term = std::move(part.grads.tensors);
        term.push_back(OSPREY_TRY(oneValue(h, part.lossSum)));
      }
      const Index k = static_cast<Index>(owner) * share.microBatches + j;
      auto received = OSPREY_TRY(ranks.broadcast(h, term, sizes, owner,
                                                 fmt::format("broadcast of micro-batch {}'s gradients", k)));
      MicroBatchGradients<H> part;
      part.lossSum = h.get(received.back(), 0);
      received.pop_back();
      part.grads = Params<H>{w.config, std::move(received)};
      OSPREY_CHECK(fold.add(h, std::move(part)));
    }
  }
  return fold.finish(batch.B, batch.T);
}

}  // namespace gpt2::train
