#include "osprey/trace/graph.hpp"

#include <stdexcept>

namespace osprey::trace {

namespace {
thread_local Graph* t_active = nullptr;
}

Graph* active() { return t_active; }

Recording::Recording(Graph& graph) {
  if (t_active) throw std::logic_error("trace: a kernel was traced inside another kernel's trace");
  t_active = &graph;
}
Recording::~Recording() { t_active = nullptr; }

Graph::Graph() : m_blocks(1), m_open{0} { m_param = add(Node{Op::Param, Kind::I64}); }

int Graph::add(Node node) {
  const int id = static_cast<int>(m_nodes.size());
  m_nodes.push_back(node);
  m_blocks[static_cast<std::size_t>(m_open.back())].push_back(id);
  return id;
}

LiteralScope::LiteralScope() : m_graph(t_active) {
  if (m_graph) ++m_graph->m_literalDepth;
}
LiteralScope::~LiteralScope() {
  if (m_graph) --m_graph->m_literalDepth;
}

int Graph::constant(Constant value) {
  if (m_literalDepth > 0) {
    Node literal{Op::Const, value.kind};
    literal.bits = value.bits;
    return add(literal);
  }
  // Each constant its own argument, even where two are equal: merging equal ones would make the
  // program's text depend on which captured numbers happen to coincide (a cache position equal to
  // a head count), and a kernel would be compiled again for each coincidence.
  const int slot = static_cast<int>(m_constants.size());
  m_constants.push_back(value);
  Node n{Op::Const, value.kind};
  n.slot = slot;
  return add(n);
}

int Graph::load(const void* data, Index size, int index) {
  int slot = -1;
  for (std::size_t s = 0; s < m_views.size(); ++s)
    if (m_views[s].data == data && m_views[s].size == size) slot = static_cast<int>(s);
  if (slot < 0) {
    slot = static_cast<int>(m_views.size());
    m_views.push_back({data, size});
  }
  Node n{Op::Load, Kind::F64, index};
  n.slot = slot;
  return add(n);
}

int Graph::beginLoop(int from, int to, int seed, Kind accKind) {
  const int id = static_cast<int>(m_loops.size());
  const int block = static_cast<int>(m_blocks.size());
  m_loops.push_back(LoopRecord{from, to, seed, -1, -1, block});
  m_blocks.emplace_back();
  m_open.push_back(block);
  Node index{Op::LoopIndex, Kind::I64};
  index.slot = id;
  Node acc{Op::LoopAcc, accKind};
  acc.slot = id;
  m_loops.back().index = add(index);
  m_loops.back().acc = add(acc);
  return id;
}

int Graph::endLoop(int loop, int result, int step) {
  auto& record = m_loops[static_cast<std::size_t>(loop)];
  if (m_open.back() != record.block) throw std::logic_error("trace: loops closed out of order");
  record.result = result;
  record.step = step;
  m_open.pop_back();
  Node n{Op::Loop, m_nodes[static_cast<std::size_t>(record.acc)].kind, record.from, record.to, record.seed};
  n.slot = loop;
  return add(n);
}

int Graph::beginBranch(int cond) {
  const int id = static_cast<int>(m_branches.size());
  const int thenBlock = static_cast<int>(m_blocks.size());
  m_blocks.emplace_back();
  m_branches.push_back(BranchRecord{cond, thenBlock, -1});
  m_open.push_back(thenBlock);
  return id;
}

void Graph::elseSide(int branch, int thenResult) {
  auto& record = m_branches[static_cast<std::size_t>(branch)];
  if (m_open.back() != record.thenBlock) throw std::logic_error("trace: branches closed out of order");
  record.thenResult = thenResult;
  m_open.pop_back();
  record.elseBlock = static_cast<int>(m_blocks.size());
  m_blocks.emplace_back();
  m_open.push_back(record.elseBlock);
}

int Graph::endBranch(int branch, int elseResult, Kind kind) {
  auto& record = m_branches[static_cast<std::size_t>(branch)];
  if (m_open.back() != record.elseBlock) throw std::logic_error("trace: branches closed out of order");
  record.elseResult = elseResult;
  m_open.pop_back();
  Node n{Op::Branch, kind, record.cond};
  n.slot = branch;
  return add(n);
}

}  // namespace osprey::trace
