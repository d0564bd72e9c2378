// Row folds: one in-order fold per row of a (rows, cols) term table, the shape of every
// LayerNorm statistic, every softmax maximum and normaliser, and every column sum of a gradient.
//
//   foldRows(h, rows, cols, seed, term, combine, finish)
//     out[r] = finish(r, combine(...combine(combine(seed, term(r, 0)), term(r, 1))..., term(r, cols-1)))
//   foldRowsFromFirst(h, rows, cols, term, combine, finish)        (cols >= 1)
//     the same fold started from term(r, 0) instead of a seed (a running maximum)
//   sumRows(h, rows, cols, term, finish)
//     foldRows from 0.0 with +
//   dotRows(h, rows, cols, term, finish)                           (term returns a Product{a, b})
//     a dot product per row: foldRows from +0.0 with acc = fma(a, b, acc), the chain of fused
//     multiply-adds in order that every product-sum is (DESIGN.md §4), matMul's outputs included
//   foldRaggedRows, foldRaggedRowsFromFirst, sumRaggedRows, dotRaggedRows(h, rows, length, ...)
//     the same with row r holding length(r) terms (attention's causal prefixes)
//
// term(Index r, Index c) -> Scalar (a Product for the dot folds) and finish(Index r, Scalar acc) ->
// Scalar are kernels (OSPREY_FN, Views and scalars captured by value); the term does its own
// checked index arithmetic.
//
// The reference definition (below) is one `build` over the rows, each row one in-order fold with
// its terms computed ahead (ordered_sum.hpp). The order of the combines is the contract; *when*
// each term is computed is not, because no term depends on the accumulator. A handler may
// therefore answer a row fold itself (a member foldRows with the argument list of
// reference::foldRows, less the handler): the cuda device computes a chunk of one row's terms with
// a whole block into shared memory and lets one thread combine them in order, so a one-row
// LayerNorm is no longer one thread waiting on 768 loads, and a 768-column gradient sum over 4096
// rows no longer runs on 768 threads. Same terms, same combines in the same order: the same
// doubles, which the typed tests check on every handler.
#pragma once

#include <type_traits>

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/ordered_sum.hpp"

namespace gpt2 {

// The length of every row of a rectangular table.
struct EveryRow {
  osprey::Index cols;
  template <class I>
  OSPREY_FN I operator()(I) const {
    return I(cols);
  }
};

namespace reference {

// Row r's fold over its `cols` terms, from `seed` or (fromFirst, cols > 0) from term(r, 0).
template <class Term, class Combine>
OSPREY_INLINE osprey::Scalar foldRow(osprey::Index r, osprey::Index cols, osprey::Scalar seed, bool fromFirst,
                                     Term term, Combine combine) {
  const auto termOf = [&](osprey::Int c) { return term(r, c.raw()); };
  if constexpr (std::is_same_v<decltype(term(r, 0)), osprey::Scalar>) {
    const bool first = fromFirst && cols > 0;
    return orderedFold(first ? term(r, 0) : seed, first ? 1 : 0, cols, termOf, combine);
  } else {  // a term that is not a value (a dot product's Product) cannot start the fold
    return orderedFold(seed, 0, cols, termOf, combine);
  }
}

// The same in a traced kernel (osprey/trace/): the row's fold is one loop of the emitted kernel,
// and whether it starts from term(r, 0) is the device's choice per row.
template <class R, class Cols, class Term, class Combine>
  requires osprey::TracedValue<R>
auto foldRow(R r, Cols cols, osprey::Scalar seed, bool fromFirst, Term term, Combine combine) {
  const auto termOf = [&](auto c) { return term(r, c); };
  if constexpr (osprey::TracedValue<decltype(term(r, cols))>) {
    if (fromFirst) {
      using S = decltype(term(r, cols));
      const auto nonEmpty = cols > 0;
      const S start = osprey::when(nonEmpty, [&] { return S(term(r, Cols(0))); }, [&] { return S(seed); });
      return orderedFold(start, osprey::select(nonEmpty, Cols(1), Cols(0)), cols, termOf, combine);
    }
  }
  return orderedFold(seed, Cols(0), cols, termOf, combine);
}

// out (rows): the fold of each row r over its length(r) terms; `fromFirst` starts it from
// term(r, 0) instead of `seed` (a row of length 0 then gives finish(r, seed), as the device does).
template <osprey::Tensor H, class Length, class Term, class Combine, class Finish>
osprey::Result<Buf<H>> foldRows(H& h, osprey::Index rows, Length length, osprey::Scalar seed, bool fromFirst,
                                Term term, Combine combine, Finish finish) {
  return h.build(rows, [=] OSPREY_FN(osprey::KernelIndex<H> r) -> osprey::KernelScalar<H> {
    return finish(r, foldRow(r, length(r), seed, fromFirst, term, combine));
  });
}

}  // namespace reference

namespace detail {
inline osprey::Result<void> checkRowCount(osprey::Index rows) {
  if (rows < 0) return osprey::Error{fmt::format("row fold: negative row count {}", rows)};
  return {};
}
inline osprey::Result<void> checkColumns(osprey::Index rows, osprey::Index cols, bool fromFirst) {
  if (rows < 0 || cols < 0)
    return osprey::Error{fmt::format("row fold: negative shape ({} rows, {} columns)", rows, cols)};
  if (fromFirst && cols < 1 && rows > 0)
    return osprey::Error{"row fold: a fold from the first term needs at least one column"};
  return {};
}

template <osprey::Tensor H, class Length, class Term, class Combine, class Finish>
osprey::Result<Buf<H>> foldRowsAnswered(H& h, osprey::Index rows, Length length, osprey::Scalar seed,
                                        bool fromFirst, Term term, Combine combine, Finish finish) {
  OSPREY_CHECK(checkRowCount(rows));
  OSPREY_GPT2_DERIVED(foldRows, rows, length, seed, fromFirst, term, combine, finish)
  return reference::foldRows(h, rows, length, seed, fromFirst, term, combine, finish);
}
}  // namespace detail

// Rows of different lengths: row r holds length(r) terms (an OSPREY_FN functor, e.g. a causal
// prefix). For the fold from the first term, every length must be >= 1.
template <osprey::Tensor H, class Length, class Term, class Combine, class Finish>
osprey::Result<Buf<H>> foldRaggedRows(H& h, osprey::Index rows, Length length, osprey::Scalar seed, Term term,
                                      Combine combine, Finish finish) {
  return detail::foldRowsAnswered(h, rows, length, seed, false, term, combine, finish);
}
template <osprey::Tensor H, class Length, class Term, class Combine, class Finish>
osprey::Result<Buf<H>> foldRaggedRowsFromFirst(H& h, osprey::Index rows, Length length, Term term,
                                               Combine combine, Finish finish) {
  return detail::foldRowsAnswered(h, rows, length, 0.0, true, term, combine, finish);
}

// finish(r, fold from `seed` of term(r, 0 .. cols)), for every row r.
template <osprey::Tensor H, class Term, class Combine, class Finish>
osprey::Result<Buf<H>> foldRows(H& h, osprey::Index rows, osprey::Index cols, osprey::Scalar seed, Term term,
                                Combine combine, Finish finish) {
  OSPREY_CHECK(detail::checkColumns(rows, cols, false));
  return foldRaggedRows(h, rows, EveryRow{cols}, seed, term, combine, finish);
}

// finish(r, fold from term(r, 0) of term(r, 1 .. cols)), for every row r; cols >= 1.
template <osprey::Tensor H, class Term, class Combine, class Finish>
osprey::Result<Buf<H>> foldRowsFromFirst(H& h, osprey::Index rows, osprey::Index cols, Term term,
                                         Combine combine, Finish finish) {
  OSPREY_CHECK(detail::checkColumns(rows, cols, true));
  return foldRaggedRowsFromFirst(h, rows, EveryRow{cols}, term, combine, finish);
}

// The combine of a sum. Regroupable: a fast handler may add a row as a tree (effect.hpp).
struct Plus {
  static constexpr bool regroupable = true;
  template <class A, class B>
  OSPREY_FN auto operator()(A a, B b) const {
    return a + b;
  }
};
// The combine of a running maximum: the earlier value wins ties, and NaN never replaces it.
// Regroupable: the maximum of any grouping is the same value (up to which NaN survives).
struct Larger {
  static constexpr bool regroupable = true;
  template <class M, class X>
  OSPREY_FN auto operator()(M m, X x) const {
    return osprey::select(x > m, x, m);
  }
};
// A term of a dot product: its two factors, which the combine multiplies and adds with one rounding
// (of the kernel's scalar type: ProductOf<osprey::KernelScalar<H>>).
template <class S>
struct ProductOf {
  S a, b;
};
using Product = ProductOf<osprey::Scalar>;
// The combine of a dot product: acc = fma(a, b, acc). Not regroupable: the chain's order is its bits.
struct FusedMultiplyAdd {
  template <class A, class S>
  OSPREY_FN auto operator()(A acc, ProductOf<S> p) const {
    return osprey::math::fma(p.a, p.b, acc);
  }
};
// The finish that keeps the fold as it is.
struct AsIs {
  template <class I, class S>
  OSPREY_FN S operator()(I, S acc) const {
    return acc;
  }
};

// finish(r, term(r, 0) + term(r, 1) + ... from 0.0), for every row r.
template <osprey::Tensor H, class Term, class Finish>
osprey::Result<Buf<H>> sumRows(H& h, osprey::Index rows, osprey::Index cols, Term term, Finish finish) {
  return foldRows(h, rows, cols, 0.0, term, Plus{}, finish);
}
template <osprey::Tensor H, class Length, class Term, class Finish>
osprey::Result<Buf<H>> sumRaggedRows(H& h, osprey::Index rows, Length length, Term term, Finish finish) {
  return foldRaggedRows(h, rows, length, 0.0, term, Plus{}, finish);
}

// finish(r, fma(a_{cols-1}, b_{cols-1}, ... fma(a_0, b_0, +0.0))) for every row r, where
// term(r, c) = Product{a_c, b_c}: each row a dot product, fused multiply-adds in c order.
template <osprey::Tensor H, class Term, class Finish>
osprey::Result<Buf<H>> dotRows(H& h, osprey::Index rows, osprey::Index cols, Term term, Finish finish) {
  return foldRows(h, rows, cols, 0.0, term, FusedMultiplyAdd{}, finish);
}
template <osprey::Tensor H, class Length, class Term, class Finish>
osprey::Result<Buf<H>> dotRaggedRows(H& h, osprey::Index rows, Length length, Term term, Finish finish) {
  return foldRaggedRows(h, rows, length, 0.0, term, FusedMultiplyAdd{}, finish);
}

}  // namespace gpt2
