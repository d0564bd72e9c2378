#include "osprey/trace/opencl_source.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "osprey/strict.hpp"

namespace osprey::trace {

namespace {

const char* typeName(Kind k) {
  switch (k) {
    case Kind::F64: return "double";
    case Kind::I64: return "long";
    case Kind::Bool: return "int";
  }
  return "?";
}

class Emitter {
 public:
  Emitter(const Graph& g) : m_g(g) {}

  std::string name(int id) const {
    const Node& n = m_g.node(id);
    switch (n.op) {
      case Op::Param: return "i";
      case Op::Const:
        if (n.slot >= 0) return fmt::format("k{}", n.slot);
        return n.kind == Kind::F64 ? fmt::format("as_double(0x{:016x}UL)", n.bits) : fmt::format("((long)0x{:016x}UL)", n.bits);
      case Op::LoopIndex: return fmt::format("j{}", n.slot);
      case Op::LoopAcc:
      case Op::Loop: return fmt::format("a{}", n.slot);
      default: return fmt::format("t{}", id);
    }
  }

  void block(int b, int depth) {
    for (const int id : m_g.blocks()[static_cast<std::size_t>(b)]) statement(id, depth);
  }

  std::string text;

 private:
  void line(int depth, const std::string& s) {
    text.append(static_cast<std::size_t>(2 * depth), ' ');
    text += s;
    text += '\n';
  }
  std::string checked(const char* fn, const Node& n) const {
    return n.b < 0 ? fmt::format("{}({}, fault)", fn, name(n.a))
                   : fmt::format("{}({}, {}, fault)", fn, name(n.a), name(n.b));
  }
  std::string binary(const Node& n, const char* op) const { return fmt::format("({} {} {})", name(n.a), op, name(n.b)); }

  void statement(int id, int depth) {
    const Node& n = m_g.node(id);
    const bool integer = n.kind == Kind::I64;
    std::string value;
    switch (n.op) {
      case Op::Param:
      case Op::Const:
      case Op::LoopIndex:
      case Op::LoopAcc: return;  // named directly
      case Op::Load: value = fmt::format("v{0}[o{0} + {1}]", n.slot, name(n.a)); break;
      case Op::Add: value = integer ? checked("osp_add", n) : binary(n, "+"); break;
      case Op::Sub: value = integer ? checked("osp_sub", n) : binary(n, "-"); break;
      case Op::Mul: value = integer ? checked("osp_mul", n) : binary(n, "*"); break;
      case Op::Div: value = integer ? checked("osp_div", n) : binary(n, "/"); break;
      case Op::Rem: value = checked("osp_rem", n); break;
      case Op::Neg: value = integer ? checked("osp_neg", n) : fmt::format("(-{})", name(n.a)); break;
      case Op::Fma: value = fmt::format("fma({}, {}, {})", name(n.a), name(n.b), name(n.c)); break;
      case Op::Sqrt: value = fmt::format("sqrt({})", name(n.a)); break;
      case Op::Lt: value = binary(n, "<"); break;
      case Op::Le: value = binary(n, "<="); break;
      case Op::Gt: value = binary(n, ">"); break;
      case Op::Ge: value = binary(n, ">="); break;
      case Op::Eq: value = binary(n, "=="); break;
      case Op::Ne: value = binary(n, "!="); break;
      case Op::And: value = binary(n, "&&"); break;
      case Op::Or: value = binary(n, "||"); break;
      case Op::Not: value = fmt::format("(!{})", name(n.a)); break;
      case Op::Select: value = fmt::format("({} ? {} : {})", name(n.a), name(n.b), name(n.c)); break;
      case Op::ToF64: value = fmt::format("((double){})", name(n.a)); break;
      case Op::ToI64: value = fmt::format("((long){})", name(n.a)); break;
      case Op::BitsOf: value = fmt::format("as_long({})", name(n.a)); break;
      case Op::FromBits: value = fmt::format("as_double({})", name(n.a)); break;
      case Op::BitAnd: value = binary(n, "&"); break;
      case Op::BitOr: value = binary(n, "|"); break;
      case Op::FaultIf:
        line(depth, fmt::format("if ({}) osp_fault(fault, {}, {}, {});", name(n.a), n.slot, name(n.b), name(n.c)));
        return;
      case Op::ShiftLeft: value = fmt::format("((long)((ulong){} << {}))", name(n.a), name(n.b)); break;
      case Op::ShiftRight: value = fmt::format("((long)((ulong){} >> {}))", name(n.a), name(n.b)); break;
      case Op::Branch: {
        const BranchRecord& branch = m_g.branches()[static_cast<std::size_t>(n.slot)];
        const std::string v = name(id);
        line(depth, fmt::format("{} {};", typeName(n.kind), v));
        line(depth, fmt::format("if ({}) {{", name(branch.cond)));
        block(branch.thenBlock, depth + 1);
        line(depth + 1, fmt::format("{} = {};", v, name(branch.thenResult)));
        line(depth, "} else {");
        block(branch.elseBlock, depth + 1);
        line(depth + 1, fmt::format("{} = {};", v, name(branch.elseResult)));
        line(depth, "}");
        return;
      }
      case Op::Loop: {
        const LoopRecord& loop = m_g.loops()[static_cast<std::size_t>(n.slot)];
        const std::string acc = name(id), k = name(loop.index);
        line(depth, fmt::format("{} {} = {};", typeName(n.kind), acc, name(loop.seed)));
        if (loop.step < 0) {
          line(depth, fmt::format("for (long {0} = {1}; {0} < {2}; ++{0}) {{", k, name(loop.from), name(loop.to)));
        } else {
          line(depth, fmt::format("for (long {0} = {1}; {0} < {2};) {{", k, name(loop.from), name(loop.to)));
        }
        block(loop.block, depth + 1);
        line(depth + 1, fmt::format("{} = {};", acc, name(loop.result)));
        if (loop.step >= 0) line(depth + 1, fmt::format("{} = {};", k, name(loop.step)));
        line(depth, "}");
        return;
      }
    }
    line(depth, fmt::format("const {} {} = {};", typeName(n.kind), name(id), value));
  }

  const Graph& m_g;
};

}  // namespace

const std::string& openClPrelude() {
  static const std::string prelude = fmt::format(R"(#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

// The first fault of a launch wins: its kind, then its operands (osprey::FaultKind).
static void osp_fault(__global long* fault, int kind, long a, long b) {{
  if (atomic_cmpxchg((volatile __global int*)fault, 0, kind) == 0) {{
    fault[1] = a;
    fault[2] = b;
  }}
}}
static long osp_add(long a, long b, __global long* fault) {{
  const long r = (long)((ulong)a + (ulong)b);
  if (((a ^ r) & (b ^ r)) < 0) {{ osp_fault(fault, {add}, a, b); return 0; }}
  return r;
}}
static long osp_sub(long a, long b, __global long* fault) {{
  const long r = (long)((ulong)a - (ulong)b);
  if (((a ^ b) & (a ^ r)) < 0) {{ osp_fault(fault, {sub}, a, b); return 0; }}
  return r;
}}
static long osp_neg(long a, __global long* fault) {{ return osp_sub(0, a, fault); }}
static long osp_mul(long a, long b, __global long* fault) {{
  const long lo = (long)((ulong)a * (ulong)b);
  if (mul_hi(a, b) != (lo >> 63)) {{ osp_fault(fault, {mul}, a, b); return 0; }}
  return lo;
}}
static long osp_div(long a, long b, __global long* fault) {{
  if (b == 0) {{ osp_fault(fault, {divByZero}, a, b); return 0; }}
  if (b == -1 && a == (-9223372036854775807L - 1)) {{ osp_fault(fault, {div}, a, b); return 0; }}
  return a / b;
}}
static long osp_rem(long a, long b, __global long* fault) {{
  if (b == 0) {{ osp_fault(fault, {remByZero}, a, b); return 0; }}
  if (b == -1) return 0;
  return a % b;
}}
)",
                                                 fmt::arg("add", static_cast<int>(FaultKind::Add)),
                                                 fmt::arg("sub", static_cast<int>(FaultKind::Sub)),
                                                 fmt::arg("mul", static_cast<int>(FaultKind::Mul)),
                                                 fmt::arg("div", static_cast<int>(FaultKind::Div)),
                                                 fmt::arg("divByZero", static_cast<int>(FaultKind::DivByZero)),
                                                 fmt::arg("remByZero", static_cast<int>(FaultKind::RemByZero)));
  return prelude;
}

std::string openClKernel(const Graph& graph, int result, Shape shape, Constants constants) {
  if (result < 0 || static_cast<std::size_t>(result) >= graph.nodes().size() ||
      graph.node(result).kind != Kind::F64)
    throw std::logic_error("trace: a kernel's value must be a traced double");
  std::string params = "__global double* out, const long outOffset, const long n, __global long* fault";
  for (std::size_t s = 0; s < graph.views().size(); ++s)
    params += fmt::format(", __global const double* v{0}, const long o{0}", s);
  std::string unpack;
  if (constants == Constants::Arguments) {
    for (std::size_t s = 0; s < graph.constants().size(); ++s)
      params += fmt::format(", const {} k{}", typeName(graph.constants()[s].kind), s);
  } else if (!graph.constants().empty()) {
    params += ", __global const ulong* constants";
    for (std::size_t s = 0; s < graph.constants().size(); ++s)
      unpack += graph.constants()[s].kind == Kind::F64
                    ? fmt::format("  const double k{0} = as_double(constants[{0}]);\n", s)
                    : fmt::format("  const long k{0} = (long)constants[{0}];\n", s);
  }

  Emitter e(graph);
  e.text += unpack;
  if (shape == Shape::EachIndex) {
    e.text += "  const long i = (long)get_global_id(0);\n  if (i >= n) return;\n";
  } else {
    e.text += "  if (get_global_id(0) != 0) return;\n  const long i = 0;\n";
  }
  e.block(0, 1);
  e.text += fmt::format("  out[outOffset + {}] = {};\n", shape == Shape::EachIndex ? "i" : "0", e.name(result));
  return fmt::format("__kernel void {}({}) {{\n{}}}\n", kKernelName, params, e.text);
}

std::string openClSource(const Graph& graph, int result, Shape shape, Constants constants) {
  return openClPrelude() + "\n" + openClKernel(graph, result, shape, constants);
}

}  // namespace osprey::trace
