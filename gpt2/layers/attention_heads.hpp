// Attention's per-head matrix products, through the effect's matMul.
//
// Every attention sum over a head's channels or positions is a matrix product with the contract's
// order (k ascending from 0.0), so attention.hpp takes its scores, its outputs and their gradients
// from h.matMul, one (batch, head) at a time, instead of one thread walking each dot product in
// global memory: on the cuda device a 1024-position step spent half its time in those walks.
//
// Why the bits do not move: a product over a full row of T positions adds, beyond a causal row's
// t+1 real terms, products with the zeros that att and dscore hold above the diagonal (or, for
// dk and dv, below the first real term). Those products are ±0.0, and a sum that starts at +0.0
// is never -0.0 (x + y rounds to -0.0 only when both are -0.0), so adding ±0.0 leaves it exactly
// as it was. This holds for finite activations; an infinite or NaN value times such a zero is
// NaN, where the position-by-position sums never read it: a run that is already non-finite.
//
// Layout: a head's block is gathered into its own row-major buffer (the product's operand), the
// products of all B*NH heads are joined in (batch, head) order into one (B, NH, rows, cols)
// buffer, a join of at most kJoinFan parts per build; or, where the handler multiplies batches,
// every head's operand is gathered in one build and the products are one batched product.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "gpt2/layers/common.hpp"

namespace gpt2::heads {

// Head bh = b*NH + hh's (rows, cols) block of a strided source: element (r, c) is
// src[b*batchStride + hh*headStride + offset + r*rowStride + c*colStride].
// Strides of 1 and of the source's row width read a block or its transpose.
struct Blocks {
  osprey::Int NH, batchStride, headStride, offset, rowStride, colStride;
  // Where element (r, c) of head bh's block lies in the source.
  // (osprey::Int indices, or traced ones in a traced kernel.)
  template <class B, class R, class C>
  OSPREY_FN auto at(B bh, R r, C c) const {
    return (bh / NH) * batchStride + (bh % NH) * headStride + offset + r * rowStride + c * colStride;
  }
  // The same blocks as the effect's strided copy takes them (osprey/block_layout.hpp).
  osprey::BlockLayout layout() const {
    return {NH.raw(), batchStride.raw(), headStride.raw(), offset.raw(), rowStride.raw(), colStride.raw()};
  }
  // Whether the blocks already lie one after another as (heads, rows, cols), row-major.
  bool contiguous(osprey::Index rows, osprey::Index cols) const {
    osprey::Index block = 0, batch = 0;
    if (__builtin_mul_overflow(rows, cols, &block) || __builtin_mul_overflow(NH.raw(), block, &batch)) return false;
    return offset.raw() == 0 && colStride.raw() == 1 && rowStride.raw() == cols && headStride.raw() == block &&
           batchStride.raw() == batch;
  }
};

// The heads of a (B, NH, T, T) tensor (att, dscore): a head's (T, T) block as it is, or transposed.
inline Blocks squareRows(osprey::Int NH, osprey::Int T) { return Blocks{NH, NH * T * T, T * T, 0, T, 1}; }
inline Blocks squareColumns(osprey::Int NH, osprey::Int T) { return Blocks{NH, NH * T * T, T * T, 0, 1, T}; }

// The heads of a (B, T, width) activation, hs channels each, whose section starts at column
// `offset` (q, k, v sections of qkv; dout): a head's (T, hs) block, or its transpose (hs, T).
struct Layout {
  osprey::Int T, width, NH, hs;
  Blocks rows(osprey::Int offset) const { return Blocks{NH, T * width, hs, offset, width, 1}; }
  Blocks transposed(osprey::Int offset) const { return Blocks{NH, T * width, hs, offset, 1, width}; }
};

// Head bh's block as its own (rows, cols) buffer.
template <osprey::Tensor H>
osprey::Result<Buf<H>> gather(H& h, const Buf<H>& src, Blocks blocks, osprey::Index bh, osprey::Index rows,
                              osprey::Index cols) {
  const auto sv = src.view();
  const osprey::Int C = cols, head = bh;
  return h.build(OSPREY_TRY(checkedProduct("attention head", {rows, cols})),
                 [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto rC = divMod(osprey::asInt(i), C);
    const auto r = rC.q, c = rC.r;
    return sv[blocks.at(head, r, c)];
  });
}

// Every head's block, one after another as (heads, rows, cols), in one build (the source itself
// when it already is that).
template <osprey::Tensor H>
osprey::Result<Buf<H>> gatherAll(H& h, const Buf<H>& src, Blocks blocks, osprey::Index heads, osprey::Index rows,
                                 osprey::Index cols) {
  const osprey::Index n = OSPREY_TRY(checkedProduct("attention heads", {heads, rows, cols}));
  if (blocks.contiguous(rows, cols) && h.length(src) == n) return src;
  if constexpr (requires { h.copyBlocks(src, blocks.layout(), heads, rows, cols); })
    return h.copyBlocks(src, blocks.layout(), heads, rows, cols);
  const auto sv = src.view();
  const osprey::Int R = rows, C = cols;
  return h.build(n,
                 [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto blockC = divMod(osprey::asInt(i), C);
    const auto block = blockC.q, c = blockC.r;
    const auto bhR = divMod(block, R);
    const auto bh = bhR.q, r = bhR.r;
    return sv[blocks.at(bh, r, c)];
  });
}

inline constexpr int kJoinFan = 8;
template <class V>
struct JoinViews {
  V part[kJoinFan];
};
// Element j of part p. A traced p cannot index the array: the device chooses among the parts, and
// reads only the chosen one.
template <class S, class V, class P, class J>
OSPREY_INLINE S partElement(const JoinViews<V>& views, P p, J j, int first = 0) {
  if constexpr (osprey::TracedValue<P>) {
    if (first == kJoinFan - 1) return S(views.part[first][j]);
    return osprey::when(
        p == first, [&] { return S(views.part[first][j]); }, [&] { return partElement<S>(views, p, j, first + 1); });
  } else {
    return views.part[p.raw()][j];
  }
}

// parts[0] | parts[1] | ... as one buffer. Every part has the same length except perhaps the last
// (shorter), which is what the products and every level of the join produce.
template <osprey::Tensor H>
osprey::Result<Buf<H>> join(H& h, std::vector<Buf<H>> parts) {
  if (parts.empty()) return h.build(0, [] OSPREY_FN(KernelIndex<H>) -> KernelScalar<H> { return 0.0; });
  while (parts.size() > 1) {
    std::vector<Buf<H>> next;
    for (std::size_t g = 0; g < parts.size(); g += kJoinFan) {
      const std::size_t count = std::min<std::size_t>(kJoinFan, parts.size() - g);
      if (count == 1) {
        next.push_back(std::move(parts[g]));
        continue;
      }
      JoinViews<decltype(parts[g].view())> views{};
      osprey::Index total = 0;
      for (std::size_t k = 0; k < count; ++k) {
        views.part[k] = parts[g + k].view();
        total += h.length(parts[g + k]);
      }
      const osprey::Int size = h.length(parts[g]);
      auto joined = OSPREY_TRY(h.build(total, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
        const auto pJ = divMod(osprey::asInt(i), size);
        const auto p = pJ.q, j = pJ.r;
        return partElement<KernelScalar<H>>(views, p, j);
      }));
      next.push_back(std::move(joined));
    }
    parts = std::move(next);
  }
  return std::move(parts[0]);
}

// For each of `heads` heads bh, in order: block bh of `left` (rows, inner) times block bh of
// `right` (inner, cols); the results joined as (heads, rows, cols). A handler that multiplies a
// batch of same-shaped products in one go (h.matMulBatched, the cuda device) gets every head's
// operands gathered once; otherwise each head is gathered and multiplied through h.matMul. Each
// output is the same k-ordered sum of the same doubles either way.
//
// A derived operation: a handler that reads strided operands in place (the fast handler's cuBLAS)
// answers it itself with a member headProducts of the same arguments.
template <osprey::Tensor H>
osprey::Result<Buf<H>> products(H& h, osprey::Index heads, osprey::Index rows, osprey::Index inner,
                                osprey::Index cols, const Buf<H>& leftSrc, Blocks left, const Buf<H>& rightSrc,
                                Blocks right) {
  OSPREY_GPT2_DERIVED(headProducts, heads, rows, inner, cols, leftSrc, left, rightSrc, right)
  if constexpr (requires { h.matMulBatched(leftSrc, rightSrc, heads, rows, inner, cols); }) {
    auto l = OSPREY_TRY(gatherAll(h, leftSrc, left, heads, rows, inner));                 // (heads, rows, inner)
    auto r = OSPREY_TRY(gatherAll(h, rightSrc, right, heads, inner, cols));               // (heads, inner, cols)
    return h.matMulBatched(l, r, heads, rows, inner, cols);                               // (heads, rows, cols)
  } else {
    std::vector<Buf<H>> parts;
    parts.reserve(static_cast<std::size_t>(heads));
    for (osprey::Index head = 0; head < heads; ++head) {
      auto l = OSPREY_TRY(gather(h, leftSrc, left, head, rows, inner));
      auto r = OSPREY_TRY(gather(h, rightSrc, right, head, inner, cols));
      parts.push_back(OSPREY_TRY(h.matMul(l, r, rows, inner, cols)));
    }
    return join(h, std::move(parts));
  }
}

}  // namespace gpt2::heads
