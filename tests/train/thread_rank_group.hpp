// Ranks as threads of one process: a RankGroup (gpt2/train/ranks.hpp) whose transport is
// shared memory, so the data-parallel step runs N ranks on the CPU in a test. Each exchange copies
// tensors to the host, meets the other threads at a barrier, and reads what it needs; sums run in
// rank order on the host.
#pragma once

#include <barrier>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpt2/train/host_copy.hpp"
#include "gpt2/train/ranks.hpp"

namespace osprey::testing::train {

// What the threads of one run share.
struct ThreadRankHub {
  explicit ThreadRankHub(int n) : size(n), meet(n), slots(static_cast<std::size_t>(n)), flags(static_cast<std::size_t>(n)) {}
  int size;
  std::barrier<> meet;
  std::vector<std::vector<std::vector<Scalar>>> slots;  // per rank: its tensors on the host
  std::vector<char> flags;
};

template <class H>
class ThreadRankGroup final : public gpt2::train::RankGroup<H> {
 public:
  using Buf = gpt2::Buf<H>;
  ThreadRankGroup(ThreadRankHub& hub, int rank) : m_hub(hub), m_rank(rank) {}

  int rank() const override { return m_rank; }
  int size() const override { return m_hub.size; }

  Result<std::vector<Buf>> broadcast(H& h, const std::vector<Buf>& mine, std::span<const Index> sizes, int root,
                                     const std::string& what) override {
    if (m_rank == root) OSPREY_CHECK(deposit(h, mine));
    m_hub.meet.arrive_and_wait();
    Result<std::vector<Buf>> out = mine;
    if (m_rank != root) out = collect(h, m_hub.slots[static_cast<std::size_t>(root)], sizes, what);
    m_hub.meet.arrive_and_wait();  // nobody overwrites a slot another rank is still reading
    return out;
  }

  Result<std::vector<Buf>> allReduceSum(H& h, const std::vector<Buf>& mine, const std::string& what) override {
    OSPREY_CHECK(deposit(h, mine));
    m_hub.meet.arrive_and_wait();
    std::vector<std::vector<Scalar>> sum = m_hub.slots[0];
    for (int r = 1; r < m_hub.size; ++r)
      for (std::size_t t = 0; t < sum.size(); ++t)
        for (std::size_t e = 0; e < sum[t].size(); ++e) sum[t][e] = sum[t][e] + m_hub.slots[static_cast<std::size_t>(r)][t][e];
    m_hub.meet.arrive_and_wait();
    std::vector<Index> sizes;
    for (const auto& t : sum) sizes.push_back(static_cast<Index>(t.size()));
    return collect(h, sum, sizes, what);
  }

  Result<bool> anyRank(bool flag, const std::string&) override {
    m_hub.flags[static_cast<std::size_t>(m_rank)] = flag ? 1 : 0;
    m_hub.meet.arrive_and_wait();
    bool any = false;
    for (char f : m_hub.flags) any = any || f != 0;
    m_hub.meet.arrive_and_wait();
    return any;
  }

 private:
  Result<void> deposit(H& h, const std::vector<Buf>& mine) {
    auto& slot = m_hub.slots[static_cast<std::size_t>(m_rank)];
    slot.clear();
    for (const Buf& b : mine) slot.push_back(OSPREY_TRY(gpt2::train::hostValues(h, b)));
    return {};
  }

  Result<std::vector<Buf>> collect(H& h, const std::vector<std::vector<Scalar>>& from, std::span<const Index> sizes,
                                   const std::string& what) {
    if (from.size() != sizes.size())
      return Error{fmt::format("{}: {} tensors sent, {} expected", what, from.size(), sizes.size())};
    std::vector<Buf> out;
    for (std::size_t i = 0; i < from.size(); ++i) {
      if (static_cast<Index>(from[i].size()) != sizes[i])
        return Error{fmt::format("{}: tensor {} has {} values, {} expected", what, i, from[i].size(), sizes[i])};
      out.push_back(OSPREY_TRY(h.fromList(std::span<const Scalar>(from[i]))));
    }
    return out;
  }

  ThreadRankHub& m_hub;
  int m_rank;
};

}  // namespace osprey::testing::train
