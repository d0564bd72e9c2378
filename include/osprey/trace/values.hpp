// Traced values: what a kernel computes with while it is being traced (graph.hpp).
//
//   Num   a double          Idx   an int64 index (checked, as osprey::Int)          Bool  a truth value
//
// They answer the operators a kernel uses (+ - * / %, comparisons, unary -) and, through the
// generic forms that dispatch here (osprey/kernel_types.hpp, osprey/math/), osprey::select,
// osprey::toScalar, osprey::math::fma and sqrt, and view reads; loop() records a loop. Each
// appends a node to the active graph. Plain numbers mix in freely and become constants. What cannot be recorded does not
// compile: a Bool has no conversion to bool, so `if (x > y)` or `x > y ? a : b` on traced values
// is an error at the kernel (write osprey::select(x > y, a, b)), and a call the tracer does not
// know has no overload for Num.
#pragma once

#include <bit>
#include <concepts>
#include <stdexcept>
#include <type_traits>

#include "osprey/strict.hpp"
#include "osprey/trace/graph.hpp"

namespace osprey::trace {

namespace detail {
inline Graph& graph() {
  Graph* g = active();
  if (!g) throw std::logic_error("trace: a traced value was used outside a trace");
  return *g;
}
inline int node(Op op, Kind kind, int a = -1, int b = -1, int c = -1) {
  return graph().add(Node{op, kind, a, b, c, -1});
}
struct FromNode {};
}  // namespace detail

struct Bool {
  using osprey_traced = void;
  int id;
  Bool(detail::FromNode, int node) : id(node) {}
  // A C++ `if` or `?:` on a traced value cannot be recorded: write osprey::select.
  explicit operator bool() const = delete;

  friend Bool operator&&(Bool a, Bool b) { return {detail::FromNode{}, detail::node(Op::And, Kind::Bool, a.id, b.id)}; }
  friend Bool operator||(Bool a, Bool b) { return {detail::FromNode{}, detail::node(Op::Or, Kind::Bool, a.id, b.id)}; }
  friend Bool operator!(Bool a) { return {detail::FromNode{}, detail::node(Op::Not, Kind::Bool, a.id)}; }
};

#define OSPREY_TRACE_ARITHMETIC(T, KIND)                                                     \
  friend T operator+(T a, T b) { return {detail::FromNode{}, detail::node(Op::Add, KIND, a.id, b.id)}; } \
  friend T operator-(T a, T b) { return {detail::FromNode{}, detail::node(Op::Sub, KIND, a.id, b.id)}; } \
  friend T operator*(T a, T b) { return {detail::FromNode{}, detail::node(Op::Mul, KIND, a.id, b.id)}; } \
  friend T operator/(T a, T b) { return {detail::FromNode{}, detail::node(Op::Div, KIND, a.id, b.id)}; } \
  friend T operator-(T a) { return {detail::FromNode{}, detail::node(Op::Neg, KIND, a.id)}; }              \
  friend Bool operator<(T a, T b) { return {detail::FromNode{}, detail::node(Op::Lt, Kind::Bool, a.id, b.id)}; } \
  friend Bool operator<=(T a, T b) { return {detail::FromNode{}, detail::node(Op::Le, Kind::Bool, a.id, b.id)}; } \
  friend Bool operator>(T a, T b) { return {detail::FromNode{}, detail::node(Op::Gt, Kind::Bool, a.id, b.id)}; } \
  friend Bool operator>=(T a, T b) { return {detail::FromNode{}, detail::node(Op::Ge, Kind::Bool, a.id, b.id)}; } \
  friend Bool operator==(T a, T b) { return {detail::FromNode{}, detail::node(Op::Eq, Kind::Bool, a.id, b.id)}; } \
  friend Bool operator!=(T a, T b) { return {detail::FromNode{}, detail::node(Op::Ne, Kind::Bool, a.id, b.id)}; } \
  T& operator+=(T b) { return *this = *this + b; }                                            \
  T& operator-=(T b) { return *this = *this - b; }                                            \
  T& operator*=(T b) { return *this = *this * b; }                                            \
  T& operator/=(T b) { return *this = *this / b; }

// A double. Plain doubles convert to constants.
struct Num {
  using osprey_traced = void;
  int id;
  Num(detail::FromNode, int node) : id(node) {}
  Num(double v) : id(detail::graph().constant({Kind::F64, std::bit_cast<std::uint64_t>(v)})) {}
  OSPREY_TRACE_ARITHMETIC(Num, Kind::F64)
};

// An index: int64 arithmetic that faults on overflow and division by zero, as osprey::Int.
// Plain integers and osprey::Int convert to constants.
struct Idx {
  using osprey_traced = void;
  int id;
  Idx(detail::FromNode, int node) : id(node) {}
  template <std::integral T>
  Idx(T v) : id(detail::graph().constant({Kind::I64, static_cast<std::uint64_t>(static_cast<Index>(v))})) {}
  Idx(Int v) : Idx(v.raw()) {}
  // An Int's raw() is its plain value; a traced index is its own.
  Idx raw() const { return *this; }
  OSPREY_TRACE_ARITHMETIC(Idx, Kind::I64)
  friend Idx operator%(Idx a, Idx b) { return {detail::FromNode{}, detail::node(Op::Rem, Kind::I64, a.id, b.id)}; }
  // Bit operations on the index's 64 bits, as on a std::uint64_t (a double's bit pattern).
  friend Idx operator&(Idx a, Idx b) { return {detail::FromNode{}, detail::node(Op::BitAnd, Kind::I64, a.id, b.id)}; }
  friend Idx operator|(Idx a, Idx b) { return {detail::FromNode{}, detail::node(Op::BitOr, Kind::I64, a.id, b.id)}; }
  friend Idx operator<<(Idx a, Idx b) { return {detail::FromNode{}, detail::node(Op::ShiftLeft, Kind::I64, a.id, b.id)}; }
  friend Idx operator>>(Idx a, Idx b) { return {detail::FromNode{}, detail::node(Op::ShiftRight, Kind::I64, a.id, b.id)}; }
  Idx& operator++() { return *this = *this + Idx(Index{1}); }
};

#undef OSPREY_TRACE_ARITHMETIC

template <class T>
concept Traced = requires { typename std::remove_cvref_t<T>::osprey_traced; };

// The traced twin of a plain value's type: Num for floating values, Idx for integers and Int.
template <class T>
using TracedOf = std::conditional_t<std::is_same_v<T, Num> || std::is_floating_point_v<T>, Num,
                                    std::conditional_t<std::is_same_v<T, Bool>, Bool, Idx>>;

inline Num toScalarTraced(Idx i) { return {detail::FromNode{}, detail::node(Op::ToF64, Kind::F64, i.id)}; }

// A strict fault of `kind` with operands a and b where c holds (osprey::fault on the host): the
// device records the first in its fault slot and the launch returns it.
inline void faultIfTraced(Bool c, FaultKind kind, Idx a, Idx b) {
  Node n{Op::FaultIf, Kind::Bool, c.id, a.id, b.id};
  n.slot = static_cast<int>(kind);
  detail::graph().add(n);
}

// Constants recorded while the returned scope lives are literals of the program (graph.hpp).
inline LiteralScope literalScopeFor(Num) { return LiteralScope{}; }

inline Idx bitsOfTraced(Num x) { return {detail::FromNode{}, detail::node(Op::BitsOf, Kind::I64, x.id)}; }
inline Num fromBitsTraced(Idx u) { return {detail::FromNode{}, detail::node(Op::FromBits, Kind::F64, u.id)}; }

inline Idx toIndexTraced(Num x) { return {detail::FromNode{}, detail::node(Op::ToI64, Kind::I64, x.id)}; }

inline Num selectTraced(Bool c, Num a, Num b) { return {detail::FromNode{}, detail::node(Op::Select, Kind::F64, c.id, a.id, b.id)}; }
inline Idx selectTraced(Bool c, Idx a, Idx b) { return {detail::FromNode{}, detail::node(Op::Select, Kind::I64, c.id, a.id, b.id)}; }
inline Bool selectTraced(Bool c, Bool a, Bool b) { return {detail::FromNode{}, detail::node(Op::Select, Kind::Bool, c.id, a.id, b.id)}; }

inline Num fmaTraced(Num a, Num b, Num c) { return {detail::FromNode{}, detail::node(Op::Fma, Kind::F64, a.id, b.id, c.id)}; }
inline Num sqrtTraced(Num a) { return {detail::FromNode{}, detail::node(Op::Sqrt, Kind::F64, a.id)}; }

// Element i of the view at `data` (size elements), read as a double.
inline Num loadTraced(const double* data, Index size, Idx i) {
  return {detail::FromNode{}, detail::graph().load(data, size, i.id)};
}

// then() if c, else otherwise(), only the chosen side evaluated on the device: both sides are
// recorded, each in its own block of an if/else.
template <class Then, class Else>
auto whenTraced(Bool c, Then then, Else otherwise) {
  using R = TracedOf<std::remove_cvref_t<decltype(then())>>;
  Graph& g = detail::graph();
  const int id = g.beginBranch(c.id);
  const R a = then();
  g.elseSide(id, a.id);
  const R b = otherwise();
  constexpr Kind kind = std::is_same_v<R, Num> ? Kind::F64 : std::is_same_v<R, Idx> ? Kind::I64 : Kind::Bool;
  return R{detail::FromNode{}, g.endBranch(id, b.id, kind)};
}

namespace detail {
// Stands for a loop's usual step, k + 1.
struct PlusOne {};
// One loop of the emitted kernel: body(k, acc) recorded once with a traced counter and
// accumulator, and the counter's step(k) unless it is PlusOne.
template <class Body, class Step>
Num recordLoop(Num seed, Idx from, Idx to, Body body, Step step) {
  Graph& g = graph();
  const int id = g.beginLoop(from.id, to.id, seed.id, Kind::F64);
  const LoopRecord& record = g.loops()[static_cast<std::size_t>(id)];
  const Idx k{FromNode{}, record.index};
  const Num next = body(k, Num{FromNode{}, record.acc});
  int after = -1;
  if constexpr (!std::is_same_v<Step, PlusOne>) after = step(k).id;
  return {FromNode{}, g.endLoop(id, next.id, after)};
}
}  // namespace detail

// acc = body(k, acc) for k = from, from + 1, ..., to - 1, from seed: one loop in the emitted
// kernel, its body recorded once with a traced counter and accumulator.
template <class Body>
Num loop(Num seed, Idx from, Idx to, Body body) {
  return detail::recordLoop(seed, from, to, body, detail::PlusOne{});
}

// acc = body(k, acc) for k = from, step(k), step(step(k)), ... while k < to: a chain walked in a
// loop of the emitted kernel.
template <class Body, class Step>
Num walk(Num seed, Idx from, Idx to, Body body, Step step) {
  return detail::recordLoop(seed, from, to, body, step);
}
template <class A, class F, class T, class Body, class Step>
Num walkTraced(A seed, F from, T to, Body body, Step step) {
  return walk(Num(seed), Idx(from), Idx(to), body, step);
}

// loop() from plain or traced bounds and seed (argument-dependent lookup finds it where any is traced).
template <class A, class F, class T, class Body>
Num loopTraced(A seed, F from, T to, Body body) {
  return loop(Num(seed), Idx(from), Idx(to), body);
}

}  // namespace osprey::trace
