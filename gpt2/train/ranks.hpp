// Data parallelism: the ranks of a training run, and the little the training step needs from
// them. One process per GPU; every rank holds the whole model, reads the same global batch, and
// computes the gradients of its own rows (train_parallel_step.hpp). Ranks exchange gradients
// through a RankGroup:
//
//   NCCL between processes on the cuda device       train_ranks_nccl.hpp (run_cuda.cu)
//   threads sharing memory, for tests on the CPU    tests/train/thread_rank_group.hpp
//
// Nothing in the model or the step names either.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpt2/layers/common.hpp"
#include "gpt2/train/data_parallel.hpp"
#include "osprey/effect.hpp"

namespace gpt2::train {

template <osprey::Tensor H>
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // root's tensors, on every rank. The root passes them in `mine`; the other ranks' `mine` is
  // not read, and buffers of `sizes` receive the copy.
  virtual osprey::Result<std::vector<Buf<H>>> broadcast(H& h, const std::vector<Buf<H>>& mine,
                                                        std::span<const osprey::Index> sizes, int root,
                                                        const std::string& what) = 0;

  // Each tensor summed over the ranks, in the transport's own order.
  virtual osprey::Result<std::vector<Buf<H>>> allReduceSum(H& h, const std::vector<Buf<H>>& mine,
                                                           const std::string& what) = 0;

  // Whether any rank's flag is set: how ranks agree to stop at the same step.
  virtual osprey::Result<bool> anyRank(bool flag, const std::string& what) = 0;
};

// The rank group a handler offers for `dp` (dp.parallel()). The general case has none; handlers
// with a transport specialise this (train_ranks_nccl.hpp for the cuda device).
template <osprey::Tensor H>
struct RankGroupFor {
  static osprey::Result<std::unique_ptr<RankGroup<H>>> open(H& h, const DataParallel& dp) {
    return osprey::Error{fmt::format("data-parallel training ({} ranks, from {}) runs on --backend gpu --device "
                                     "cuda, one GPU per rank; this run is on {}",
                                     dp.size, dp.source, h.device())};
  }
};

}  // namespace gpt2::train
