// What every GPT-2 layer shares: the dimension legend, the buffer alias, shape checks, and the
// small data-movement operations (transpose, column slices) the layers are built from.
//
// The layers (this directory) are GPT-2's forward and backward passes, each written ONCE against
// the Tensor effect (include/osprey/effect.hpp) in the style of llm.c's train_gpt2.c: a shape
// comment on every tensor, plain loops in a fixed order, strict IEEE (every sum of products a
// chain of fused multiply-adds in order and nothing else fused, transcendentals only from
// osprey::math). Every handler therefore returns the same doubles, bit for bit.
//
// Dimension legend (all row-major):
//   B   batch size                 T   sequence length (positions per sequence)
//   C   channels (model width)     NH  attention heads        hs = C / NH, one head's width
//   V   vocabulary size            maxT  the model's context (rows of the position table)
//   N = B * T rows of activations  IC / OC  in / out channels of a matrix multiply
//   Tc  positions held in a KV cache
//
// Conventions:
//   * Weight matrices are Hugging Face Conv1D: (IC, OC) row-major, so y = x . W + b.
//   * Token ids and targets are buffers of doubles holding integers (exact up to 2^53); a value
//     that is not an integer in [0, V) stops the layer with an "index out of range" fault.
//   * Layers are functional: every result (activations, gradients, optimiser state) is a new
//     buffer; nothing is updated in place.
//
// Derived operations (DESIGN.md §2 "Extensions"): each layer `gpt2::fooForward` is the public
// entry point, and its body is the reference definition `gpt2::reference::fooForward`, written
// from the primitives. A handler may answer a layer itself with a fused kernel by providing a
// member function of the same name and argument list (minus the handler); the public entry point
// selects it at compile time with a `requires` clause (see OSPREY_GPT2_DERIVED below). A fast
// handler's answer is checked against gpt2::reference::* within the tolerance it documents. An
// exact handler answers a layer only with the reference's own operations in the reference's
// order, so its results do not depend on whether a fused path exists: the row fold
// (fold_rows.hpp) on every exact handler, and the recorded cuda decoding step's encoder, cached
// attention and one-launch LayerNorm (gpt2/cuda/); tests compare each with the reference bit for
// bit.
//
// The layers' result records (LayerNormOut<H>, MatmulGrads<H>, ...) are templates over the handler
// without the Tensor constraint, so a handler can name them in its own member declarations while
// it is still an incomplete type.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "osprey/block_layout.hpp"
#include "osprey/config.hpp"
#include "osprey/effect.hpp"
#include "osprey/math.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#include "osprey/view.hpp"

namespace gpt2 {

// What the layers' kernels take and return (osprey/kernel_types.hpp): osprey::Index and Scalar on
// the handlers that run kernels as compiled, traced values on one that traces them (opencl).
using osprey::KernelIndex;
using osprey::KernelScalar;

// The handler's buffer type: every tensor a layer takes or returns.
template <osprey::Tensor H>
using Buf = typename H::Buffer;

// The derived-operation hook. Inside a public layer function:
//
//   OSPREY_GPT2_DERIVED(layernormForward, x, w, b, N, C);
//   return reference::layernormForward(h, x, w, b, N, C);
//
// expands to "if the handler has h.layernormForward(x, w, b, N, C) returning this function's
// result type, return its answer". The check is a C++20 requires-expression evaluated per
// handler at compile time: no runtime dispatch, no optional slots.
#define OSPREY_GPT2_DERIVED(NAME, ...)                                                    \
  if constexpr (requires { h.NAME(__VA_ARGS__); }) {                                      \
    return h.NAME(__VA_ARGS__);                                                           \
  }

// Element count of a buffer must be `expected`; the error names the layer and the tensor.
template <osprey::Tensor H>
osprey::Result<void> checkLength(H& h, const Buf<H>& b, osprey::Index expected, const char* layer,
                                 const char* tensor) {
  const osprey::Index n = h.length(b);
  if (n != expected)
    return osprey::Error{fmt::format("{}: {} has {} elements, expected {}", layer, tensor, n, expected)};
  return {};
}

// Every dimension must be non-negative and their product must fit an Index.
inline osprey::Result<osprey::Index> checkedProduct(const char* layer,
                                                     std::initializer_list<osprey::Index> dims) {
  osprey::Index p = 1;
  for (osprey::Index d : dims) {
    if (d < 0) return osprey::Error{fmt::format("{}: negative dimension {}", layer, d)};
    if (__builtin_mul_overflow(p, d, &p))
      return osprey::Error{fmt::format("{}: tensor size overflows a 64-bit index", layer)};
  }
  return p;
}

// i = q * d + r with 0 <= r < d, for i >= 0 and d > 0, from one (checked) division: kernels map
// a flat element index to (row, column) once per element, and a 64-bit division is the most
// expensive instruction in most of them.
// (An index and quotient of the kernel's index type: osprey::Int, or the traced index.) Kernels name
// the two as variables rather than a structured binding: clang before 16 cannot capture a
// structured binding in a lambda, and the generic forms (when, foldRange, ...) take lambdas.
template <class I>
struct QuotRemOf {
  I q, r;
};
using QuotRem = QuotRemOf<osprey::Int>;
template <class I, class D>
OSPREY_INLINE auto divMod(I i, D d) {
  using R = decltype(i / d);
  const R q = i / d;
  return QuotRemOf<R>{q, i - q * d};
}

// A token id or target held in a double, as an index in [0, V). Anything else (negative, not an
// integer, NaN, >= V) is an "index out of range" fault: the layer stops, nothing is made up.
// (Read from a traced double, the checks are the device's: the fault is recorded there.)
template <class S>
  requires osprey::TracedValue<S>
auto tokenIndex(S id, osprey::Index V) {
  const auto inRange = id >= 0.0 && id < static_cast<osprey::Scalar>(V);
  const auto finite = id == id && id > -9.0e18 && id < 9.0e18;
  const auto k = osprey::toIndex(osprey::select(finite, id, S(0.0)));
  const auto bad = !inRange || osprey::toScalar(k) != id;
  osprey::faultIf(bad, osprey::FaultKind::Bounds, osprey::select(finite, k, decltype(k)(-1)), V);
  return osprey::select(bad, decltype(k)(0), k);
}
OSPREY_INLINE osprey::Int tokenIndex(osprey::Scalar id, osprey::Index V) {
  if (!(id >= 0.0 && id < static_cast<osprey::Scalar>(V))) {
    osprey::fault(osprey::FaultKind::Bounds, id == id && id > -9.0e18 && id < 9.0e18
                                                 ? static_cast<osprey::Index>(id) : -1, V);
    return osprey::Int(0);
  }
  const auto k = static_cast<osprey::Index>(id);
  if (static_cast<osprey::Scalar>(k) != id) {
    osprey::fault(osprey::FaultKind::Bounds, k, V);
    return osprey::Int(0);
  }
  return osprey::Int(k);
}

// xT (cols, rows) = transpose of x (rows, cols).
template <osprey::Tensor H>
osprey::Result<Buf<H>> transpose(H& h, const Buf<H>& x, osprey::Index rows, osprey::Index cols) {
  const osprey::Index n = OSPREY_TRY(checkedProduct("transpose", {rows, cols}));
  OSPREY_CHECK(checkLength(h, x, n, "transpose", "x"));
  // A handler with a strided copy (the cuda device's tiled one) reads x down its columns in place.
  if constexpr (requires { h.copyBlocks(x, osprey::BlockLayout{}, 1, cols, rows); })
    return h.copyBlocks(x, osprey::BlockLayout{1, 0, 0, 0, 1, cols}, 1, cols, rows);
  const auto xv = x.view();
  const osprey::Int R = rows, Cc = cols;
  return h.build(n, [=] OSPREY_FN(osprey::KernelIndex<H> o) -> osprey::KernelScalar<H> {
    // output element o = (j, i) of the (cols, rows) result reads x[i][j]
    const auto jI = divMod(osprey::asInt(o), R);
    const auto j = jI.q, i = jI.r;
    return xv[i * Cc + j];
  });
}

// out (rows, count) = columns [start, start + count) of x (rows, width).
template <osprey::Tensor H>
osprey::Result<Buf<H>> sliceColumns(H& h, const Buf<H>& x, osprey::Index rows, osprey::Index width,
                                    osprey::Index start, osprey::Index count) {
  const osprey::Index n = OSPREY_TRY(checkedProduct("sliceColumns", {rows, count}));
  OSPREY_CHECK(checkLength(h, x, OSPREY_TRY(checkedProduct("sliceColumns", {rows, width})),
                           "sliceColumns", "x"));
  if (start < 0 || count < 0 || start > width || count > width - start)
    return osprey::Error{fmt::format("sliceColumns: columns [{}, {}+{}) outside width {}", start,
                                     start, count, width)};
  const auto xv = x.view();
  const osprey::Int W = width, S = start, K = count;
  return h.build(n, [=] OSPREY_FN(osprey::KernelIndex<H> o) -> osprey::KernelScalar<H> {
    const auto rC = divMod(osprey::asInt(o), K);
    const auto r = rC.q, c = rC.r;
    return xv[r * W + S + c];
  });
}

// out = a + b, element-wise (also how two gradient contributions to one tensor are combined).
// (A build over both views rather than zipWith: the kernel is then one closure, which nvcc's
// extended-lambda rules accept however the handler wraps it.)
template <osprey::Tensor H>
osprey::Result<Buf<H>> add(H& h, const Buf<H>& a, const Buf<H>& b) {
  OSPREY_CHECK(checkLength(h, b, h.length(a), "add", "b"));
  const auto av = a.view(), bv = b.view();
  return h.build(h.length(a), [=] OSPREY_FN(osprey::KernelIndex<H> i) -> osprey::KernelScalar<H> {
    return av[i] + bv[i];
  });
}

// Sum of all elements, left to right from 0.0 (the checksum printed for each gradient tensor).
template <osprey::Tensor H>
osprey::Result<osprey::Scalar> sum(H& h, const Buf<H>& x) {
  using S = osprey::KernelScalar<H>;
  return h.reduce(x, 0.0, [=] OSPREY_FN(S acc, S v) -> S {
    return acc + v;
  });
}

}  // namespace gpt2
