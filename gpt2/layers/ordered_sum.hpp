// In-order sums whose terms are computed ahead of their additions.
//
// Every sum in the layers is a left fold from 0.0 in index order, acc = ((0.0 + t0) + t1) + ...
// (a dot product's: acc = fma(a_k, b_k, acc), k ascending), and that order fixes the bits. It does not fix when a term is *computed*: a term is a load or
// two and perhaps a product or an exp, none of which depends on acc. Written as the plain loop, a
// GPU thread (which issues in order) waits for each term's global load before it issues the
// next, so a 768-long row costs 768 memory latencies; decoding's LayerNorm and attention rows
// were mostly that wait. orderedSum computes kTermsAhead terms into registers, then adds them in
// order: the same rounded terms, the same additions in the same order, so the same doubles as the
// plain loop on every handler, with up to kTermsAhead terms' loads in flight.
#pragma once

#include "gpt2/layers/common.hpp"

namespace gpt2 {

inline constexpr osprey::Index kTermsAhead = 8;

// combine(...combine(combine(acc, term(from)), term(from+1))..., term(count-1)): a left fold in
// index order, with the terms computed Ahead at a time ahead of the combines.
// `term` takes an osprey::Int.
//
// The loop's own counter is a plain Index: from <= c <= count, so neither c + j (j < count - c)
// nor count - c can overflow, and the checked arithmetic of osprey::Int (which costs a one-row GPU
// thread more than the loads it indexes) is left to the terms' own index expressions.
// A term is a Scalar, or whatever else `combine` takes as its second argument (a dot product's
// Product of two factors, fold_rows.hpp).
template <osprey::Index Ahead = kTermsAhead, class Term, class Combine>
OSPREY_INLINE osprey::Scalar orderedFold(osprey::Scalar acc, osprey::Int from, osprey::Int count, Term term,
                                         Combine combine) {
  using Value = decltype(term(osprey::Int(0)));
  const osprey::Index end = count.raw();
  osprey::Index c = from.raw();
  for (; c < end && end - c >= Ahead; c += Ahead) {
    Value t[Ahead];
    OSPREY_UNROLL
    for (osprey::Index j = 0; j < Ahead; ++j) t[j] = term(osprey::Int(c + j));
    OSPREY_UNROLL
    for (osprey::Index j = 0; j < Ahead; ++j) acc = combine(acc, t[j]);
  }
  for (; c < end; ++c) acc = combine(acc, term(osprey::Int(c)));
  return acc;
}

// The same fold in a traced kernel (an opencl device's, osprey/trace/): one loop of the emitted
// kernel, `term` taking the traced counter; the device fetches ahead as it will.
template <osprey::Index Ahead = kTermsAhead, class Acc, class From, class Count, class Term, class Combine>
  requires(osprey::TracedValue<Acc> || osprey::TracedValue<From> || osprey::TracedValue<Count>)
auto orderedFold(Acc acc, From from, Count count, Term term, Combine combine) {
  return loopTraced(acc, from, count, [&](auto c, auto folded) { return combine(folded, term(c)); });
}

// term(0) + term(1) + ... + term(count-1), left to right from 0.0.
template <osprey::Index Ahead = kTermsAhead, class Term>
OSPREY_INLINE osprey::Scalar orderedSum(osprey::Int count, Term term) {
  return orderedFold<Ahead>(0.0, 0, count, term, [](osprey::Scalar a, osprey::Scalar t) { return a + t; });
}

}  // namespace gpt2
