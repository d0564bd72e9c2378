// The BPE merge loop (see tokenizer_bpe.hpp for the rule it reproduces).
//
// How the priority queue reproduces OpenAI's pass-by-pass loop exactly:
// * Candidates are ordered by (rank, position); positions are the word's byte offsets, which
//   keep list order, so all occurrences of the current pair pop left to right.
// * A candidate is stale when its left symbol was removed or either symbol has changed since it
//   was queued; it is skipped. This is also how an occurrence overlapping the previous merge
//   ("a a a" merging "a a") is skipped.
// * A merge makes new pairs with its neighbours. One with a higher rank than the current pair
//   simply waits in the queue. One with a lower rank (possible only in an unusual merges file)
//   must wait until the current pass has merged every occurrence, because OpenAI's loop looks
//   for the next lowest pair only then; such candidates are held back until the pass ends.
//   (A new pair can never be the current pair again: the merged symbol differs from its parts.)
#include "gpt2/tokenizer/bpe.hpp"

#include <functional>
#include <queue>

namespace gpt2 {

namespace {

struct Candidate {
  int rank;
  int position;  // index of the left symbol's node
  int left;
  int right;
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : position > other.position;
  }
};

struct Node {
  int symbol;
  int previous;  // -1: none
  int next;      // -1: none
  bool alive;
};

}  // namespace

std::vector<int> applyMerges(const MergeTable& merges, const std::vector<int>& symbols) {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return symbols;

  std::vector<Node> nodes(symbols.size());
  for (int i = 0; i < n; ++i) nodes[i] = Node{symbols[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (int i = 0; i + 1 < n; ++i) {
    if (const Merge* m = merges.find(symbols[i], symbols[i + 1])) {
      queue.push(Candidate{m->rank, i, symbols[i], symbols[i + 1]});
    }
  }

  std::vector<Candidate> heldBack;  // lower-ranked pairs made during the current pass
  int passRank = -1;                // rank of the pair being merged now

  auto offer = [&](int position) {  // queue the pair starting at `position`, if it merges
    const int nextPos = nodes[position].next;
    if (nextPos < 0) return;
    const int left = nodes[position].symbol;
    const int right = nodes[nextPos].symbol;
    const Merge* m = merges.find(left, right);
    if (m == nullptr) return;
    const Candidate c{m->rank, position, left, right};
    if (m->rank < passRank) {
      heldBack.push_back(c);
    } else {
      queue.push(c);
    }
  };

  while (true) {
    if (queue.empty() || queue.top().rank != passRank) {
      // The current pass is over: release what it held back, then take the lowest pair.
      for (const Candidate& c : heldBack) queue.push(c);
      heldBack.clear();
      if (queue.empty()) break;
      passRank = queue.top().rank;
    }
    const Candidate top = queue.top();
    queue.pop();

    Node& leftNode = nodes[top.position];
    if (!leftNode.alive || leftNode.symbol != top.left || leftNode.next < 0) continue;
    Node& rightNode = nodes[leftNode.next];
    if (rightNode.symbol != top.right) continue;

    // Merge: the left node takes the merged symbol, the right node leaves the list.
    leftNode.symbol = merges.find(top.left, top.right)->merged;
    rightNode.alive = false;
    leftNode.next = rightNode.next;
    if (rightNode.next >= 0) nodes[rightNode.next].previous = top.position;

    if (leftNode.previous >= 0) offer(leftNode.previous);
    offer(top.position);
  }

  std::vector<int> out;
  out.reserve(symbols.size());
  for (int i = 0; i >= 0; i = nodes[i].next) out.push_back(nodes[i].symbol);
  return out;
}

}  // namespace gpt2
