// In-order sums whose terms are computed ahead of their additions.
//
// Every sum in the layers is a left fold from 0.0 in index order, acc = ((0.0 + t0) + t1) + ...,
// and that order fixes the bits. It does not fix when a term is *computed*: a term is a load or
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
// index order, with the terms computed kTermsAhead at a time ahead of the combines.
// `term` takes an osprey::Int.
template <class Term, class Combine>
OSPREY_INLINE osprey::Scalar orderedFold(osprey::Scalar acc, osprey::Int from, osprey::Int count, Term term,
                                         Combine combine) {
  osprey::Int c = from;
  for (; c + osprey::Int(kTermsAhead) <= count; c = c + osprey::Int(kTermsAhead)) {
    osprey::Scalar t[kTermsAhead];
    for (osprey::Index j = 0; j < kTermsAhead; ++j) t[j] = term(c + osprey::Int(j));
    for (osprey::Index j = 0; j < kTermsAhead; ++j) acc = combine(acc, t[j]);
  }
  for (; c < count; ++c) acc = combine(acc, term(c));
  return acc;
}

// term(0) + term(1) + ... + term(count-1), left to right from 0.0.
template <class Term>
OSPREY_INLINE osprey::Scalar orderedSum(osprey::Int count, Term term) {
  return orderedFold(0.0, 0, count, term, [](osprey::Scalar a, osprey::Scalar t) { return a + t; });
}

// A contiguous row x[start .. start+count) summed through `term` (the value, a squared
// deviation...). On the GPU the whole row is first requested into the multiprocessor's L1 (one
// prefetch per 128-byte line, all in flight at once), so the in-order loop below reads from L1
// rather than waiting on the memory system eight loads at a time: a one-row LayerNorm's statistics
// are one thread's work. The prefetch is a hint with no effect on any value. The caller has checked
// that the row lies in x, so the loop's own index arithmetic cannot overflow.
template <class Term>
OSPREY_INLINE osprey::Scalar rowSum(osprey::View x, osprey::Index start, osprey::Index count, Term term) {
  const osprey::Scalar* p = x.data + start;
#if OSPREY_DEVICE_PASS
  constexpr osprey::Index kLine = 128 / sizeof(osprey::Scalar);
  for (osprey::Index c = 0; c < count; c += kLine) asm volatile("prefetch.global.L1 [%0];" ::"l"(p + c));
  if (count > 0) asm volatile("prefetch.global.L1 [%0];" ::"l"(p + count - 1));
#endif
  return orderedSum(count, [&](osprey::Int c) { return term(p[c.raw()]); });
}

}  // namespace gpt2
