// Byte-pair encoding of one pre-tokenised word: the merge table and the merge loop.
//
// The result is exactly that of OpenAI's encoder: repeatedly take the adjacent pair with the
// lowest merge rank and merge every occurrence of it, left to right (an occurrence whose first
// symbol was just consumed by the previous merge is skipped), until no adjacent pair has a rank.
// It is computed with a priority queue over a linked list, so a word of n bytes costs
// O(n log n) rather than OpenAI's O(n^2): a long run of letters or spaces stays cheap.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gpt2 {

// What merging a pair gives: its rank (its line in merges.txt, 0 first) and the merged symbol.
struct Merge {
  int rank = 0;
  int merged = 0;
};

// Pairs of symbol ids (vocabulary ids) -> their Merge.
class MergeTable {
 public:
  // A pair listed twice keeps its later rank, as OpenAI's dict(zip(merges, ranks)) does.
  void add(int left, int right, Merge merge) { m_merges[key(left, right)] = merge; }
  const Merge* find(int left, int right) const {
    const auto it = m_merges.find(key(left, right));
    return it == m_merges.end() ? nullptr : &it->second;
  }
  std::size_t size() const { return m_merges.size(); }
  void reserve(std::size_t n) { m_merges.reserve(n); }

 private:
  static std::uint64_t key(int left, int right) {
    return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
  }
  std::unordered_map<std::uint64_t, Merge> m_merges;
};

// The symbols of one word (one vocabulary id per byte) -> its token ids after all merges.
// Requires that a merged symbol differs from both of its parts (the loader checks that every
// vocabulary id names one token, which guarantees it).
std::vector<int> applyMerges(const MergeTable& merges, const std::vector<int>& symbols);

}  // namespace gpt2
