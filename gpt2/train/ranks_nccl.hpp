// The cuda device's rank group: NCCL between processes, one per GPU (train_ranks.hpp). Included
// by run_cuda.cu only, before the training loop is instantiated for the commands' cuda handler
// (ExactCuda, gpt2/cuda/exact_cuda.hpp), so the loop finds this specialisation of RankGroupFor.
//
// Broadcasts and all-reduces run in place on the buffers' device memory; receiving ranks get
// fresh buffers from the device's allocator. Rank 0 creates the rendezvous file with NCCL's id
// and removes it once every rank has joined (joining completes only when all have read it).
#pragma once

#include <cuda_runtime.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpt2/cuda/exact_cuda.hpp"
#include "gpt2/train/ranks.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/nccl.hpp"

namespace gpt2::train {

class NcclRankGroup final : public RankGroup<ExactCuda> {
 public:
  using Buffer = ExactCuda::Buffer;

  explicit NcclRankGroup(std::unique_ptr<osprey::NcclComm> comm) : m_comm(std::move(comm)) {}

  int rank() const override { return m_comm->rank(); }
  int size() const override { return m_comm->size(); }

  osprey::Result<std::vector<Buffer>> broadcast(ExactCuda& h, const std::vector<Buffer>& mine,
                                                std::span<const osprey::Index> sizes, int root,
                                                const std::string& what) override {
    std::vector<Buffer> out;
    if (rank() == root) {
      if (mine.size() != sizes.size())
        return osprey::Error{fmt::format("{}: {} tensors to send, {} expected", what, mine.size(), sizes.size())};
      for (std::size_t i = 0; i < mine.size(); ++i)
        if (mine[i].size() != sizes[i])
          return osprey::Error{fmt::format("{}: tensor {} has {} values, {} expected", what, i, mine[i].size(), sizes[i])};
      out = mine;
    } else {
      for (const osprey::Index n : sizes) out.push_back(OSPREY_TRY(fresh(h, n)));
    }
    OSPREY_CHECK(m_comm->broadcast(pointers(out), sizes, root, what));
    return out;
  }

  osprey::Result<std::vector<Buffer>> allReduceSum(ExactCuda&, const std::vector<Buffer>& mine,
                                                   const std::string& what) override {
    std::vector<osprey::Index> sizes;
    for (const Buffer& b : mine) sizes.push_back(b.size());
    OSPREY_CHECK(m_comm->allReduceSum(pointers(mine), sizes, what));  // in place: mine is the step's own sum
    return mine;
  }

  osprey::Result<bool> anyRank(bool flag, const std::string& what) override {
    return OSPREY_TRY(m_comm->allReduceMax(flag ? 1.0 : 0.0, what)) > 0.0;
  }

 private:
  static std::vector<osprey::Scalar*> pointers(const std::vector<Buffer>& buffers) {
    std::vector<osprey::Scalar*> p;
    for (const Buffer& b : buffers) p.push_back(b.data());
    return p;
  }

  static osprey::Result<Buffer> fresh(ExactCuda& h, osprey::Index n) {
    const auto& device = h.runtime();
    osprey::Scalar* p = OSPREY_TRY(device->allocate(n));
    return Buffer(device, p, n);
  }

  std::unique_ptr<osprey::NcclComm> m_comm;
};

template <>
struct RankGroupFor<ExactCuda> {
  static osprey::Result<std::unique_ptr<RankGroup<ExactCuda>>> open(ExactCuda& h, const DataParallel& dp) {
    (void)h.device();  // the handler's device is open, and current on this thread
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
      return osprey::Error{fmt::format("rank {}: which CUDA device? {}", dp.rank, cudaGetErrorString(e))};
    const auto id = OSPREY_TRY(osprey::NcclComm::exchangeId(dp.rank, dp.rendezvous, dp.timeoutSeconds));
    auto comm = OSPREY_TRY(osprey::NcclComm::open(dp.rank, dp.size, id, device, dp.timeoutSeconds));
    if (dp.leader()) {
      std::error_code ec;
      std::filesystem::remove(dp.rendezvous, ec);  // every rank has joined, so none still needs it
    }
    return std::unique_ptr<RankGroup<ExactCuda>>(new NcclRankGroup(std::move(comm)));
  }
};

}  // namespace gpt2::train
