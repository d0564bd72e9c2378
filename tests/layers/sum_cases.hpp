// The in-order sums (ordered_sum.hpp) and attention's per-head products (attention_heads.hpp),
// generic over the handler: both are speed rewrites that must give the plain loops' doubles bit for
// bit, so every case compares bit patterns with a host loop written the plain way.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "gpt2/layers/attention_heads.hpp"
#include "gpt2/layers/ordered_sum.hpp"
#include "layers/layer_support.hpp"

namespace gpt2::testing::sum_cases {

using osprey::testing::firstBitDifference;

// Wide dynamic range and signed zeros, so any change of order or of rounding shows in the bits.
inline std::vector<Scalar> awkwardValues(std::size_t n, std::uint64_t seed) {
  auto v = randomValues(n, seed);
  for (std::size_t i = 0; i < n; i += 3) v[i] *= 1e9;
  for (std::size_t i = 1; i < n; i += 5) v[i] *= 1e-7;
  for (std::size_t i = 2; i < n; i += 11) v[i] = -0.0;
  return v;
}

// Counts around the look-ahead widths (8 for terms, 64 for rows), and empty.
inline constexpr Index kCounts[] = {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200};

// Element c of the result: sum_j a[j] * b[j] for j < count(c), with orderedSum; element c + n of
// it: rowSum of a's first count(c) values through a squared-deviation term; element c + 2n: the
// running maximum of a[1 .. count) from a[0] with orderedFold.
template <class H>
void orderedSumsEqualPlainLoops(H& h) {
  constexpr std::size_t kMax = 200;
  const auto a = awkwardValues(kMax, 71), b = awkwardValues(kMax, 72);
  auto aBuf = lift(h, a), bBuf = lift(h, b);
  const osprey::View x = aBuf.view(), y = bBuf.view();
  constexpr Index n = sizeof(kCounts) / sizeof(kCounts[0]);
  std::vector<Scalar> counts(std::begin(kCounts), std::end(kCounts));
  auto countBuf = lift(h, counts);
  const osprey::View cv = countBuf.view();
  const Scalar mean = 0.25;
  auto got = must(h.build(3 * n, [=] OSPREY_FN(Index i) -> Scalar {
    const Index which = i / n;
    const auto count = static_cast<Index>(cv[i % n]);
    if (which == 0) return orderedSum(count, [&](osprey::Int j) { return x[j] * y[j]; });
    if (which == 1) return rowSum(x, 0, count, SquaredDeviation{mean});
    if (count == 0) return 0.0;
    return orderedFold(x[0], 1, count, [&](osprey::Int j) { return x[j]; },
                       [](Scalar m, Scalar v) { return v > m ? v : m; });
  }));
  std::vector<Scalar> want;
  for (int which = 0; which < 3; ++which) {
    for (Index count : kCounts) {
      Scalar acc = which == 2 && count > 0 ? a[0] : 0.0;
      for (Index j = which == 2 ? 1 : 0; j < count; ++j) {
        const auto k = static_cast<std::size_t>(j);
        if (which == 0) acc = acc + a[k] * b[k];
        if (which == 1) acc = acc + (a[k] - mean) * (a[k] - mean);
        if (which == 2 && a[k] > acc) acc = a[k];
      }
      want.push_back(acc);
    }
  }
  const auto values = readAll(h, got);
  const std::size_t at = firstBitDifference(values, want);
  ASSERT_EQ(at, want.size()) << "element " << at << ": " << values[at] << " vs plain loop " << want[at];
}

// join() of `parts` buffers of `size` elements (the last `last` long) is their concatenation, for
// one part, one level of joining and several levels (more than 8 parts, 8^2 + 1 parts).
template <class H>
void joinConcatenates(H& h) {
  struct Case {
    std::size_t parts, size, last;
  };
  for (Case c : {Case{0, 3, 3}, Case{1, 5, 5}, Case{2, 4, 1}, Case{8, 3, 3}, Case{9, 4, 2}, Case{17, 2, 1},
                 Case{65, 3, 2}}) {
    SCOPED_TRACE(::testing::Message() << c.parts << " parts of " << c.size << ", the last " << c.last);
    std::vector<Buf<H>> parts;
    std::vector<Scalar> want;
    for (std::size_t p = 0; p < c.parts; ++p) {
      const auto values = awkwardValues(p + 1 == c.parts ? c.last : c.size, 100 + p);
      want.insert(want.end(), values.begin(), values.end());
      parts.push_back(lift(h, values));
    }
    const auto got = readAll(h, must(heads::join(h, std::move(parts))));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(firstBitDifference(got, want), want.size());
  }
}

// products() of gathered blocks (one of them a transpose) equals, head by head, the plain k-ordered
// product of the same blocks, laid out as (heads, rows, cols).
template <class H>
void headProductsEqualPlainProducts(H& h) {
  constexpr Index kHeads = 11, kRows = 3, kInner = 5, kCols = 4;
  const auto left = awkwardValues(kHeads * kRows * kInner, 5);   // (heads, rows, inner)
  const auto right = awkwardValues(kHeads * kCols * kInner, 6);  // (heads, cols, inner): read transposed
  auto l = lift(h, left), r = lift(h, right);
  const auto got = readAll(h, must(heads::products(h, kHeads, kRows, kInner, kCols,
      [&](Index head) { return heads::gather(h, l, head * kRows * kInner, kInner, 1, kRows, kInner); },
      [&](Index head) { return heads::gather(h, r, head * kCols * kInner, 1, kInner, kInner, kCols); })));
  std::vector<Scalar> want;
  for (Index head = 0; head < kHeads; ++head)
    for (Index i = 0; i < kRows; ++i)
      for (Index j = 0; j < kCols; ++j) {
        Scalar acc = 0.0;
        for (Index k = 0; k < kInner; ++k)
          acc = acc + left[static_cast<std::size_t>((head * kRows + i) * kInner + k)] *
                          right[static_cast<std::size_t>((head * kCols + j) * kInner + k)];
        want.push_back(acc);
      }
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(firstBitDifference(got, want), want.size());
}

}  // namespace gpt2::testing::sum_cases
