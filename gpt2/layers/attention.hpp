// Causal multi-head self-attention (GPT-2's), KV-cache decoding, and the backward.
//
// qkv (B, T, 3C) holds, per row, q | k | v, each C wide and head-major (head h owns channels
// [h*hs, (h+1)*hs) of its section), as Hugging Face's c_attn produces it. For each batch b,
// head h and query position t:
//
//   pre[t2]  = (sum_i q[t][i] * k[t2][i]) / sqrt(hs)          t2 <= t (i ascending, from 0.0)
//   m        = max_t2 pre[t2]                                 (t2 ascending)
//   att[t2]  = exp(pre[t2] - m) / (sum_t2 exp(pre[t2] - m))   t2 <= t; att = 0 for t2 > t
//   out[t][i] = sum_t2 att[t2] * v[t2][i]                     (t2 ascending, from 0.0)
//
// Every sum of products here is a chain of fused multiply-adds in the order written (DESIGN.md §4).
//
// The sums over i and over t2 are per-head matrix products taken from h.matMul
// (attention_heads.hpp says why their bits equal the position-by-position sums written above).
// attentionDecode computes the same thing for ONE new query against a cache of keys/values, with
// the same terms folded in the same order (fold_rows.hpp: the softmax maxima and normalisers are
// row folds in both), so its output is row t of attentionForward bit for bit.
#pragma once

#include <type_traits>

#include "gpt2/layers/attention_heads.hpp"
#include "gpt2/layers/common.hpp"
#include "gpt2/layers/fold_rows.hpp"

namespace gpt2 {

template <class H>
struct AttentionOut {
  Buf<H> out;  // (B, T, C)
  // What attentionBackward reads besides qkv. The reference: the softmax probabilities
  // (B, NH, T, T), 0 above the diagonal. A handler answering both (a derived pair) may keep
  // something else: the fast handler's flash attention keeps each softmax row's log-sum-exp and
  // out, and recomputes the probabilities.
  Buf<H> att;
};

namespace detail {
inline osprey::Result<osprey::Index> headSize(const char* layer, osprey::Index C, osprey::Index NH) {
  if (C <= 0 || NH <= 0 || C % NH != 0)
    return osprey::Error{fmt::format("{}: {} channels do not split into {} heads", layer, C, NH)};
  return C / NH;
}
// The causal prefix of softmax row r of a (rows, T) table: its first r % T + 1 entries.
struct CausalPrefix {
  osprey::Int T;
  template <class I>
  OSPREY_FN I operator()(I r) const {
    return (osprey::asInt(r) % T + 1).raw();
  }
};

// Per row r of the scaled scores, pre(r, t2), over its first length(r) entries: the max (from the
// first entry; the earlier of equal maxima is kept), then the sum of exp(pre - max) from 0.0. The
// full pass and the cached step both take their softmax from here, so a cached row's statistics
// are the full pass's bit for bit. pre is a function, not a table: the full pass computes each
// scaled score where it is read (the same division each time, so the same double), instead of
// writing and reading back a (B, NH, T, T) table.
template <class H>
struct SoftmaxStats {
  Buf<H> maxes;  // (rows)
  Buf<H> sums;   // (rows)
};
template <osprey::Tensor H, class Length, class Pre>
osprey::Result<SoftmaxStats<H>> softmaxStats(H& h, osprey::Index rows, Length length, Pre pre) {
  auto maxes = OSPREY_TRY(foldRaggedRowsFromFirst(h, rows, length,
      [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> t2) -> KernelScalar<H> { return pre(r, t2); }, Larger{}, AsIs{}));
  const auto mv = maxes.view();
  auto sums = OSPREY_TRY(sumRaggedRows(h, rows, length,
      [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> t2) -> KernelScalar<H> { return osprey::math::exp(pre(r, t2) - mv[r]); },
      AsIs{}));
  return SoftmaxStats<H>{std::move(maxes), std::move(sums)};
}
// Entry (r, t2) of a (rows, T) table held in a buffer.
template <class V>
struct TableEntry {
  V table;
  osprey::Int T;
  template <class R, class C>
  OSPREY_FN auto operator()(R r, C t2) const {
    return table[osprey::asInt(r) * T + t2];
  }
};

// out (C): the attention of one new position whose query is in qkvRow (3C) against the positions
// of kCache and vCache that `positions` counts (every head's and every channel's row: the new
// position's own key and value already among them). The cache's rows are C apart and the score
// table's rows `stride` apart; scoreRows(i) is hs for the score of head i / stride at position
// i % stride, 0 for none. The reference decode passes rectangles (EveryRow); a handler whose
// position lives on the device passes lengths it reads there (gpt2/cuda/recorded_cuda.hpp): the
// same terms and combines either way.
template <osprey::Tensor H, class ScoreRows, class Positions>
osprey::Result<Buf<H>> attendCached(H& h, const Buf<H>& qkvRow, const Buf<H>& kCache, const Buf<H>& vCache,
                                    osprey::Index scoreRowCount, osprey::Index stride, osprey::Index C,
                                    osprey::Index NH, osprey::Index hs, ScoreRows scoreRows, Positions positions) {
  const auto qv = qkvRow.view(), kv = kCache.view(), vv = vCache.view();
  const osprey::Int Ti = stride, Ci = C, HS = hs;
  const osprey::math::DivideBy bySqrtHs(osprey::math::sqrt(static_cast<osprey::Scalar>(hs)));

  // pre (NH, stride): the scaled score of every cached position, q · k over the head's channels (a
  // dot fold: the same fused multiply-adds, in the same order, as the forward's product).
  auto pre = OSPREY_TRY(dotRaggedRows(h, scoreRowCount, scoreRows,
      [=] OSPREY_FN(KernelIndex<H> i, KernelIndex<H> d) -> ProductOf<KernelScalar<H>> {
        const auto hhT2 = divMod(osprey::asInt(i), Ti);
        const auto hh = hhT2.q, t2 = hhT2.r;
        return {qv[hh * HS + d], kv[t2 * Ci + hh * HS + d]};
      },
      [=] OSPREY_FN(KernelIndex<H>, KernelScalar<H> score) -> KernelScalar<H> { return bySqrtHs(score); }));
  const auto pv = pre.view();
  // Per head, over every cached position: the max and the sum of exp(pre - max), (NH) each.
  const TableEntry<std::remove_cvref_t<decltype(pv)>> preEntry{pv, Ti};
  const auto stats = OSPREY_TRY(softmaxStats(h, NH, positions, preEntry));
  const auto mv = stats.maxes.view(), sv = stats.sums.view();
  // out[c] = sum over the cached positions t2 of att[hh][t2] * v[t2][c], att being computed in the
  // term exactly as the forward's att kernel computes it (the same double, not stored).
  return dotRaggedRows(h, C, positions,
      [=] OSPREY_FN(KernelIndex<H> c, KernelIndex<H> t2) -> ProductOf<KernelScalar<H>> {
        const auto hh = osprey::asInt(c) / HS;
        const auto att = osprey::math::exp(pv[hh * Ti + t2] - mv[hh]) / sv[hh];
        return {att, vv[osprey::asInt(t2) * Ci + c]};
      },
      AsIs{});
}

}  // namespace detail

namespace reference {
// att (R, T) from scores (R, T), R = B·NH·T softmax rows: row r's softmax over its causal prefix
// t2 <= r % T of the scaled scores pre = scale(scores) (computed where each is read, the same
// operation each time, so the same double), 0 past it. The max and the normaliser are
// detail::softmaxStats's row folds; each probability is exp(pre - max) / sum.
template <osprey::Tensor H>
osprey::Result<Buf<H>> causalSoftmax(H& h, const Buf<H>& scores, osprey::Index R, osprey::Index T,
                                     osprey::math::DivideBy scale) {
  const osprey::Index RT = OSPREY_TRY(checkedProduct("causal softmax", {R, T}));
  const auto cv = scores.view();
  const osprey::Int Ti = T;
  const auto pre = [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> t2) -> KernelScalar<H> {
    return scale(cv[osprey::asInt(r) * Ti + t2]);
  };
  const auto stats = OSPREY_TRY(detail::softmaxStats(h, R, detail::CausalPrefix{Ti}, pre));
  const auto mv = stats.maxes.view(), sv = stats.sums.view();
  return h.build(RT, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    using S = KernelScalar<H>;
    const auto rT2 = divMod(osprey::asInt(i), Ti);
    const auto r = rT2.q, t2 = rT2.r;
    return osprey::when(
        t2 > r % Ti, [&] { return S(0.0); }, [&] { return S(osprey::math::exp(scale(cv[i]) - mv[r]) / sv[r]); });
  });
}

// dscore (R, T), the gradient of the unscaled scores, from the probabilities att (R, T) and their
// gradient datt (R, T) (read only on each row's causal prefix): per row the dot product
// sum_t2 att · datt over the prefix (a dot fold), then scale(att · (datt - dot)), 0 past it.
template <osprey::Tensor H>
osprey::Result<Buf<H>> causalSoftmaxBackward(H& h, const Buf<H>& att, const Buf<H>& datt, osprey::Index R,
                                             osprey::Index T, osprey::math::DivideBy scale) {
  const osprey::Index RT = OSPREY_TRY(checkedProduct("causal softmax backward", {R, T}));
  const auto av = att.view(), gv = datt.view();
  const osprey::Int Ti = T;
  auto rowDot = OSPREY_TRY(dotRaggedRows(h, R, detail::CausalPrefix{Ti},
      [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> t2) -> ProductOf<KernelScalar<H>> {
        const auto at = osprey::asInt(r) * Ti + t2;
        return {av[at], gv[at]};
      },
      AsIs{}));
  const auto rv = rowDot.view();
  return h.build(RT, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    using S = KernelScalar<H>;
    const auto rT2 = divMod(osprey::asInt(i), Ti);
    const auto r = rT2.q, t2 = rT2.r;
    return osprey::when(t2 > r % Ti, [&] { return S(0.0); }, [&] { return S(scale(av[i] * (gv[i] - rv[r]))); });
  });
}
}  // namespace reference

namespace detail {
inline osprey::Result<osprey::Index> checkSoftmaxRows(const char* L, osprey::Index R, osprey::Index T) {
  if (R < 0 || T < 0 || (T == 0 && R != 0) || (T > 0 && R % T != 0))
    return osprey::Error{fmt::format("{}: {} rows are not whole sequences of {} positions", L, R, T)};
  return checkedProduct(L, {R, T});
}

// reference::causalSoftmax, or a handler's own answer (the exact cuda handler's one launch,
// gpt2/cuda/softmax_rows.hpp), after the shape checks both share.
template <osprey::Tensor H>
osprey::Result<Buf<H>> causalSoftmax(H& h, const Buf<H>& scores, osprey::Index R, osprey::Index T,
                                     osprey::math::DivideBy scale) {
  const char* L = "causal softmax";
  OSPREY_CHECK(checkLength(h, scores, OSPREY_TRY(checkSoftmaxRows(L, R, T)), L, "scores"));
  OSPREY_GPT2_DERIVED(causalSoftmax, scores, R, T, scale)
  return reference::causalSoftmax(h, scores, R, T, scale);
}
// reference::causalSoftmaxBackward, or a handler's own answer, after the same checks.
template <osprey::Tensor H>
osprey::Result<Buf<H>> causalSoftmaxBackward(H& h, const Buf<H>& att, const Buf<H>& datt, osprey::Index R,
                                             osprey::Index T, osprey::math::DivideBy scale) {
  const char* L = "causal softmax backward";
  const osprey::Index RT = OSPREY_TRY(checkSoftmaxRows(L, R, T));
  OSPREY_CHECK(checkLength(h, att, RT, L, "att"));
  OSPREY_CHECK(checkLength(h, datt, RT, L, "datt"));
  OSPREY_GPT2_DERIVED(causalSoftmaxBackward, att, datt, R, T, scale)
  return reference::causalSoftmaxBackward(h, att, datt, R, T, scale);
}
}  // namespace detail

namespace reference {

// out (B, T, C), att (B, NH, T, T) from qkv (B, T, 3C).
template <osprey::Tensor H>
osprey::Result<AttentionOut<H>> attentionForward(H& h, const Buf<H>& qkv, osprey::Index B,
                                                 osprey::Index T, osprey::Index C, osprey::Index NH) {
  const char* L = "attention";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  OSPREY_CHECK(checkLength(h, qkv, OSPREY_TRY(checkedProduct(L, {B, T, 3, C})), L, "qkv"));
  const osprey::Index R = OSPREY_TRY(checkedProduct(L, {B, NH, T}));  // softmax rows
  const osprey::Int Ti = T, Ci = C, C3 = 3 * C, NHi = NH, HS = hs;
  const osprey::math::DivideBy bySqrtHs(osprey::math::sqrt(static_cast<osprey::Scalar>(hs)));
  const osprey::Index BH = OSPREY_TRY(checkedProduct(L, {B, NH}));
  const heads::Layout qkvHeads{Ti, C3, NHi, HS};  // q at column 0, k at C, v at 2C

  // scores (B, NH, T, T): q · k over the head's channels, every (t, t2).
  auto scores = OSPREY_TRY(heads::products(h, BH, T, hs, T, qkv, qkvHeads.rows(0), qkv, qkvHeads.transposed(Ci)));
  auto att = OSPREY_TRY(detail::causalSoftmax(h, scores, R, T, bySqrtHs));
  // outHeads (B, NH, T, hs) = att · v per head (t2 ascending; att is 0 past the causal prefix).
  auto outHeads = OSPREY_TRY(heads::products(h, BH, T, T, hs, att, heads::squareRows(NHi, Ti), qkv,
                                             qkvHeads.rows(2 * Ci)));
  const auto ov = outHeads.view();
  auto out = OSPREY_TRY(h.build(OSPREY_TRY(checkedProduct(L, {B, T, C})),
                                [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto btC = divMod(osprey::asInt(i), Ci);
    const auto bt = btC.q, c = btC.r;
    const auto bT = divMod(bt, Ti);
    const auto b = bT.q, t = bT.r;
    const auto hhD = divMod(c, HS);
    const auto hh = hhD.q, d = hhD.r;
    return ov[((b * NHi + hh) * Ti + t) * HS + d];
  }));
  return AttentionOut<H>{std::move(out), std::move(att)};
}

// out (C): the attention of one new position whose query is in qkvRow (3C) (q | k | v) against
// kCache (Tc, C) and vCache (Tc, C), which already end with this position's key and value.
// Equal bit for bit to row Tc-1 of attentionForward over the same Tc positions.
template <osprey::Tensor H>
osprey::Result<Buf<H>> attentionDecode(H& h, const Buf<H>& qkvRow, const Buf<H>& kCache,
                                       const Buf<H>& vCache, osprey::Index Tc, osprey::Index C,
                                       osprey::Index NH) {
  const char* L = "attention decode";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  if (Tc <= 0) return osprey::Error{fmt::format("{}: the cache must hold the new position", L)};
  OSPREY_CHECK(checkLength(h, qkvRow, OSPREY_TRY(checkedProduct(L, {3, C})), L, "qkv row"));
  const osprey::Index TcC = OSPREY_TRY(checkedProduct(L, {Tc, C}));
  OSPREY_CHECK(checkLength(h, kCache, TcC, L, "key cache"));
  OSPREY_CHECK(checkLength(h, vCache, TcC, L, "value cache"));
  return detail::attendCached(h, qkvRow, kCache, vCache, OSPREY_TRY(checkedProduct(L, {NH, Tc})), Tc, C, NH, hs,
                              EveryRow{hs}, EveryRow{Tc});
}

// dqkv (B, T, 3C) from dout (B, T, C) and the forward's qkv (B, T, 3C) and att (B, NH, T, T).
//
//   datt[t][t2] = sum_i dout[t][i] * v[t2][i]                       t2 <= t
//   dpre[t][t2] = att[t][t2] * (datt[t][t2] - sum_t2' att[t][t2'] * datt[t][t2'])
//   dq[t][i]  = sum_{t2 <= t}  (dpre[t][t2] / sqrt(hs)) * k[t2][i]   (t2 ascending)
//   dk[t2][i] = sum_{t >= t2}  (dpre[t][t2] / sqrt(hs)) * q[t][i]    (t ascending)
//   dv[t2][i] = sum_{t >= t2}  att[t][t2] * dout[t][i]               (t ascending)
template <osprey::Tensor H>
osprey::Result<Buf<H>> attentionBackward(H& h, const Buf<H>& dout, const Buf<H>& qkv,
                                         const Buf<H>& att, osprey::Index B, osprey::Index T,
                                         osprey::Index C, osprey::Index NH) {
  const char* L = "attention backward";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  const osprey::Index BTC = OSPREY_TRY(checkedProduct(L, {B, T, C}));
  OSPREY_CHECK(checkLength(h, dout, BTC, L, "dout"));
  OSPREY_CHECK(checkLength(h, qkv, OSPREY_TRY(checkedProduct(L, {B, T, 3, C})), L, "qkv"));
  const osprey::Index R = OSPREY_TRY(checkedProduct(L, {B, NH, T}));
  OSPREY_CHECK(checkLength(h, att, OSPREY_TRY(checkedProduct(L, {R, T})), L, "att"));
  const osprey::Int Ti = T, Ci = C, C3 = 3 * C, NHi = NH, HS = hs;
  const osprey::math::DivideBy bySqrtHs(osprey::math::sqrt(static_cast<osprey::Scalar>(hs)));
  const osprey::Index BH = OSPREY_TRY(checkedProduct(L, {B, NH}));
  const heads::Layout qkvHeads{Ti, C3, NHi, HS}, doutHeads{Ti, Ci, NHi, HS};
  // att and dscore (B, NH, T, T) per head, as they are (already the products' layout: no copy).
  const heads::Blocks squareRows = heads::squareRows(NHi, Ti);

  // datt (B, NH, T, T) = dout · vᵀ per head. Only the causal prefix of each row is read below, so
  // the entries above the diagonal are left as the product made them.
  auto datt = OSPREY_TRY(heads::products(h, BH, T, hs, T, dout, doutHeads.rows(0), qkv, qkvHeads.transposed(2 * Ci)));
  // dscore (B, NH, T, T): gradient of the unscaled score q.k; 0 above the diagonal.
  auto dscore = OSPREY_TRY(detail::causalSoftmaxBackward(h, att, datt, R, T, bySqrtHs));
  // Per head: dq = dscore · k (B, NH, T, hs). dk = dscoreᵀ · q and dv = attᵀ · dout are taken
  // transposed, dkᵀ = qᵀ · dscore and dvᵀ = doutᵀ · att (B, NH, hs, T): each output is the same
  // sum over t ascending (dk[t2][i] = sum_t q[t][i] · dscore[t][t2] either way), and only the
  // (T, hs) heads are transposed, never the (T, T) tables.
  auto dq = OSPREY_TRY(heads::products(h, BH, T, T, hs, dscore, squareRows, qkv, qkvHeads.rows(Ci)));
  auto dkT = OSPREY_TRY(heads::products(h, BH, hs, T, T, qkv, qkvHeads.transposed(0), dscore, squareRows));
  auto dvT = OSPREY_TRY(heads::products(h, BH, hs, T, T, dout, doutHeads.transposed(0), att, squareRows));
  const auto qg = dq.view(), kg = dkT.view(), vg = dvT.view();
  return h.build(OSPREY_TRY(checkedProduct(L, {B, T, 3, C})),
                 [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto btCol = divMod(osprey::asInt(i), C3);
    const auto bt = btCol.q, col = btCol.r;
    const auto bT = divMod(bt, Ti);
    const auto b = bT.q, t = bT.r;
    const auto sectionC = divMod(col, Ci);
    const auto section = sectionC.q, c = sectionC.r;
    const auto hhD = divMod(c, HS);
    const auto hh = hhD.q, d = hhD.r;
    using S = KernelScalar<H>;
    const auto head = b * NHi + hh;
    return osprey::when(
        section == 0, [&] { return S(qg[(head * Ti + t) * HS + d]); },
        [&] {
          const auto at = (head * HS + d) * Ti + t;
          return S(osprey::select(section == 1, kg[at], vg[at]));
        });
  });
}

}  // namespace reference

// out (Tc + 1, C): cache (Tc, C) with row (C) appended.
template <osprey::Tensor H>
osprey::Result<Buf<H>> appendRow(H& h, const Buf<H>& cache, const Buf<H>& row, osprey::Index Tc,
                                 osprey::Index C) {
  const char* L = "appendRow";
  const osprey::Index n = OSPREY_TRY(checkedProduct(L, {Tc, C}));
  OSPREY_CHECK(checkLength(h, cache, n, L, "cache"));
  OSPREY_CHECK(checkLength(h, row, C, L, "row"));
  const auto cv = cache.view(), rv = row.view();
  return h.build(OSPREY_TRY(checkedProduct(L, {Tc + 1, C})),
                 [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    using S = KernelScalar<H>;
    return osprey::when(i < n, [&] { return S(cv[i]); }, [&] { return S(rv[osprey::asInt(i) - n]); });
  });
}

// out (Tc + 1, C): cache (Tc, C) with columns [start, start + C) of `row` (width) appended. The
// same doubles as appendRow(cache, sliceColumns(row, 1, width, start, C)), in one kernel: a KV
// cache grows by a key or value taken straight from the new position's qkv row (3C).
template <osprey::Tensor H>
osprey::Result<Buf<H>> appendRowSlice(H& h, const Buf<H>& cache, const Buf<H>& row, osprey::Index width,
                                      osprey::Index start, osprey::Index Tc, osprey::Index C) {
  const char* L = "appendRow";
  const osprey::Index n = OSPREY_TRY(checkedProduct(L, {Tc, C}));
  OSPREY_CHECK(checkLength(h, cache, n, L, "cache"));
  OSPREY_CHECK(checkLength(h, row, width, L, "row"));
  if (start < 0 || C < 0 || start > width || C > width - start)
    return osprey::Error{fmt::format("{}: columns [{}, {}+{}) outside width {}", L, start, start, C, width)};
  const auto cv = cache.view(), rv = row.view();
  const osprey::Int tail = osprey::asInt(start) - osprey::asInt(n);  // row index of output element n
  return h.build(OSPREY_TRY(checkedProduct(L, {Tc + 1, C})),
                 [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    using S = KernelScalar<H>;
    return osprey::when(i < n, [&] { return S(cv[i]); }, [&] { return S(rv[osprey::asInt(i) + tail]); });
  });
}

template <osprey::Tensor H>
osprey::Result<AttentionOut<H>> attentionForward(H& h, const Buf<H>& qkv, osprey::Index B,
                                                 osprey::Index T, osprey::Index C, osprey::Index NH) {
  OSPREY_GPT2_DERIVED(attentionForward, qkv, B, T, C, NH)
  return reference::attentionForward(h, qkv, B, T, C, NH);
}

template <osprey::Tensor H>
osprey::Result<Buf<H>> attentionDecode(H& h, const Buf<H>& qkvRow, const Buf<H>& kCache,
                                       const Buf<H>& vCache, osprey::Index Tc, osprey::Index C,
                                       osprey::Index NH) {
  OSPREY_GPT2_DERIVED(attentionDecode, qkvRow, kCache, vCache, Tc, C, NH)
  return reference::attentionDecode(h, qkvRow, kCache, vCache, Tc, C, NH);
}

// The new position's attention while decoding, and the cache it leaves: keys and values (Tc, C)
// grown by columns [C, 2C) and [2C, 3C) of qkvRow (3C), then attentionDecode over the Tc + 1
// positions. out (C), keys and values (Tc + 1, C).
template <class H>
struct AttendAppendingOut {
  Buf<H> out, keys, values;
};

namespace reference {
template <osprey::Tensor H>
osprey::Result<AttendAppendingOut<H>> attendAppending(H& h, const Buf<H>& qkvRow, const Buf<H>& keys,
                                                      const Buf<H>& values, osprey::Index Tc, osprey::Index C,
                                                      osprey::Index NH) {
  auto grownKeys = OSPREY_TRY(appendRowSlice(h, keys, qkvRow, 3 * C, C, Tc, C));          // (Tc+1, C)
  auto grownValues = OSPREY_TRY(appendRowSlice(h, values, qkvRow, 3 * C, 2 * C, Tc, C));  // (Tc+1, C)
  auto out = OSPREY_TRY(gpt2::attentionDecode(h, qkvRow, grownKeys, grownValues, Tc + 1, C, NH));  // (C)
  return AttendAppendingOut<H>{std::move(out), std::move(grownKeys), std::move(grownValues)};
}
}  // namespace reference

// A derived operation: a handler whose cache has room for the new row answers it in one kernel
// (the fast handler's recorded decoding step, fast/decode_graph.hpp).
template <osprey::Tensor H>
osprey::Result<AttendAppendingOut<H>> attendAppending(H& h, const Buf<H>& qkvRow, const Buf<H>& keys,
                                                      const Buf<H>& values, osprey::Index Tc, osprey::Index C,
                                                      osprey::Index NH) {
  OSPREY_GPT2_DERIVED(attendAppending, qkvRow, keys, values, Tc, C, NH)
  return reference::attendAppending(h, qkvRow, keys, values, Tc, C, NH);
}

template <osprey::Tensor H>
osprey::Result<Buf<H>> attentionBackward(H& h, const Buf<H>& dout, const Buf<H>& qkv,
                                         const Buf<H>& att, osprey::Index B, osprey::Index T,
                                         osprey::Index C, osprey::Index NH) {
  OSPREY_GPT2_DERIVED(attentionBackward, dout, qkv, att, B, T, C, NH)
  return reference::attentionBackward(h, dout, qkv, att, B, T, C, NH);
}

}  // namespace gpt2
