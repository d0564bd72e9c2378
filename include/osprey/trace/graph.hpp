// A traced kernel: what one call of a kernel computes, recorded as a graph of operations so that
// a device which takes kernels as source text (OpenCL) can be given the same computation.
//
// A tracing pass calls the kernel once with traced values (values.hpp) in place of its index and
// scalars; every operation on them appends a node here instead of computing a number. Captured
// numbers (shapes, learning rates, literals) become constants, each an argument of the emitted
// kernel rather than text in it, so one kernel body compiles once whatever it captured; views
// become loads from argument buffers. Control flow the tracer cannot follow (a C++ `if` on a
// traced value) does not compile; loops whose bounds are traced are recorded as loops (loop()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "osprey/config.hpp"

namespace osprey::trace {

// What a node's value is: a double, an int64 (checked like osprey::Int), or a truth value.
enum class Kind : std::uint8_t { F64, I64, Bool };

enum class Op : std::uint8_t {
  Param,     // the work item's index (I64)
  Const,     // an argument constant (slot), or a literal in the text (slot -1, its bits in `bits`)
  Load,      // element a of view `slot` (F64)
  Add, Sub, Mul, Div, Rem, Neg,  // F64 as IEEE, I64 checked (a fault, never a wrapped value)
  Fma, Sqrt,                     // F64: one rounding each
  Lt, Le, Gt, Ge, Eq, Ne,        // -> Bool
  And, Or, Not,                  // Bool
  Select,    // a ? b : c
  ToF64,     // I64 -> F64, rounded to nearest as static_cast<double>
  ToI64,     // F64 -> I64, truncated toward zero as static_cast<Index>
  BitsOf,    // F64 -> I64, the double's bit pattern
  FromBits,  // I64 -> F64, the double with that bit pattern
  BitAnd, BitOr, ShiftLeft, ShiftRight,  // I64 bit operations (unchecked: they are not arithmetic)
  FaultIf,   // if (a) the fault of kind `slot` with operands b, c (a statement: no value)
  Branch,    // the value of branch `slot`: one side evaluated, as a C++ if/else
  Loop,      // the fold of loop `slot` (its result)
  LoopIndex, // loop `slot`'s counter, inside its body
  LoopAcc,   // loop `slot`'s accumulator, inside its body
};

struct Node {
  Op op;
  Kind kind;
  int a = -1, b = -1, c = -1;  // operands (node ids)
  int slot = -1;               // Const: constant slot; Load: view slot; Loop*: loop id
  std::uint64_t bits = 0;      // a literal constant's bits
};

// for (counter = from; counter < to; counter = step) acc = body(counter, acc), starting from seed;
// the step is ++counter unless the loop walks a chain (step: a node of the body).
struct LoopRecord {
  int from, to, seed;
  int index, acc;          // the LoopIndex and LoopAcc nodes
  int block;               // the body's nodes, in order
  int result = -1;         // the body's value, the next acc
  int step = -1;           // the next counter, or -1 for counter + 1
};

// if (cond) value = then-block's result; else value = else-block's result. Only the taken side's
// nodes run, so a side may read or compute what would be out of range on the other.
struct BranchRecord {
  int cond;
  int thenBlock, elseBlock;
  int thenResult = -1, elseResult = -1;
};

// A constant argument: its kind and its bits (a double's bit pattern, or the int64 itself).
struct Constant {
  Kind kind;
  std::uint64_t bits;
  bool operator==(const Constant&) const = default;
};

// A view the kernel reads: its element storage's address as the kernel saw it; the device maps it
// back to its memory when launching.
struct ViewSlot {
  const void* data;
  Index size;
};

class Graph {
 public:
  Graph();

  int add(Node node);
  // A constant: an argument, or while literals are on (LiteralScope), text in the program.
  int constant(Constant value);
  int load(const void* data, Index size, int index);

  // Opens a loop's body: nodes added until endLoop() belong to it.
  int beginLoop(int from, int to, int seed, Kind accKind);
  int endLoop(int loop, int result, int step = -1);

  // Opens a branch's then-side; elseSide() closes it and opens the else-side; endBranch() closes
  // that and adds the branch's value.
  int beginBranch(int cond);
  void elseSide(int branch, int thenResult);
  int endBranch(int branch, int elseResult, Kind kind);

  const std::vector<Node>& nodes() const { return m_nodes; }
  const Node& node(int id) const { return m_nodes[static_cast<std::size_t>(id)]; }
  const std::vector<std::vector<int>>& blocks() const { return m_blocks; }
  const std::vector<LoopRecord>& loops() const { return m_loops; }
  const std::vector<BranchRecord>& branches() const { return m_branches; }
  const std::vector<Constant>& constants() const { return m_constants; }
  const std::vector<ViewSlot>& views() const { return m_views; }
  int param() const { return m_param; }

 private:
  std::vector<Node> m_nodes;
  std::vector<std::vector<int>> m_blocks;  // block 0: the kernel's body
  std::vector<int> m_open;                 // blocks being filled, innermost last
  std::vector<LoopRecord> m_loops;
  std::vector<BranchRecord> m_branches;
  std::vector<Constant> m_constants;
  std::vector<ViewSlot> m_views;
  int m_param = -1;
  int m_literalDepth = 0;
  friend class LiteralScope;
};

// While one lives, the active graph's new constants are literals in the program's text rather than
// arguments: for code whose numbers are its own (the shared-source exp, log and tanh), so that
// they neither fill the kernel's argument list nor vary between calls. Does nothing outside a trace.
class LiteralScope {
 public:
  LiteralScope();
  ~LiteralScope();
  LiteralScope(const LiteralScope&) = delete;
  LiteralScope& operator=(const LiteralScope&) = delete;

 private:
  Graph* m_graph;
};

// The graph traced values record into, on this thread; null outside a trace.
Graph* active();

// Makes `graph` the active one for its lifetime (traces do not nest).
class Recording {
 public:
  explicit Recording(Graph& graph);
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
};

}  // namespace osprey::trace
