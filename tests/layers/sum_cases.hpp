// The in-order sums (ordered_sum.hpp) and attention's per-head products (attention_heads.hpp),
// generic over the handler: both are speed rewrites that must give the plain loops' doubles bit for
// bit, so every case compares bit patterns with a host loop written the plain way.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gpt2/layers/attention_heads.hpp"
#include "gpt2/layers/fold_rows.hpp"
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

// Element c of the result: sum_j a[j] for j < count(c), with orderedSum; element c + n of it: the
// dot product of a and b over those j with 64 terms ahead (orderedFold of Products, one fused
// multiply-add each), then c + 2n: the same for a's squared deviations (the variance's terms);
// element c + 3n: the running maximum of a[1 .. count) from a[0] with orderedFold.
template <class H>
void orderedSumsEqualPlainLoopsOn(H& h) {
  constexpr std::size_t kMax = 200;
  const auto a = awkwardValues(kMax, 71), b = awkwardValues(kMax, 72);
  auto aBuf = lift(h, a), bBuf = lift(h, b);
  const osprey::View x = aBuf.view(), y = bBuf.view();
  constexpr Index n = sizeof(kCounts) / sizeof(kCounts[0]);
  std::vector<Scalar> counts(std::begin(kCounts), std::end(kCounts));
  auto countBuf = lift(h, counts);
  const osprey::View cv = countBuf.view();
  const Scalar mean = 0.25;
  auto got = must(h.build(4 * n, [=] OSPREY_FN(Index i) -> Scalar {
    const Index which = i / n;
    const auto count = static_cast<Index>(cv[i % n]);
    if (which == 0) return orderedSum(count, [&](osprey::Int j) { return x[j]; });
    if (which == 1)
      return orderedFold<64>(0.0, 0, count, [&](osprey::Int j) { return Product{x[j], y[j]}; }, FusedMultiplyAdd{});
    if (which == 2)
      return orderedFold(0.0, 0, count, [&](osprey::Int j) { return squaredDeviation(mean, x.data[j.raw()]); },
                         FusedMultiplyAdd{});
    if (count == 0) return 0.0;
    return orderedFold(x[0], 1, count, [&](osprey::Int j) { return x[j]; },
                       [](Scalar m, Scalar v) { return v > m ? v : m; });
  }));
  std::vector<Scalar> want;
  for (int which = 0; which < 4; ++which) {
    for (Index count : kCounts) {
      Scalar acc = which == 3 && count > 0 ? a[0] : 0.0;
      for (Index j = which == 3 ? 1 : 0; j < count; ++j) {
        const auto k = static_cast<std::size_t>(j);
        if (which == 0) acc = acc + a[k];
        if (which == 1) acc = std::fma(a[k], b[k], acc);
        if (which == 2) acc = std::fma(a[k] - mean, a[k] - mean, acc);
        if (which == 3 && a[k] > acc) acc = a[k];
      }
      want.push_back(acc);
    }
  }
  const auto values = readAll(h, got);
  const std::size_t at = firstBitDifference(values, want);
  ASSERT_EQ(at, want.size()) << "element " << at << ": " << values[at] << " vs plain loop " << want[at];
}

// (Checked on the handlers that compile kernels; see orderedSumsEqualPlainLoopsOn.)
template <class H>
void orderedSumsEqualPlainLoops(H& h) {
  if constexpr (osprey::TracedValue<KernelIndex<H>>) {
    GTEST_SKIP() << "orderedFold's terms-ahead blocks are the compiled kernels'; a traced kernel's fold is one loop "
                    "of the device's program, which the row-fold cases check";
  } else {
    orderedSumsEqualPlainLoopsOn(h);
  }
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

// products() of gathered blocks (the left ones already laid out as (heads, rows, inner), the right
// ones read transposed) equals, head by head, the plain k-ordered product of the same blocks, laid
// out as (heads, rows, cols). The shapes take each of the cuda device's batched tilings (32, 64 and
// 128 wide) and its product-by-product few-rows and few-columns kernels.
template <class H>
void headProductsEqualPlainProducts(H& h) {
  struct Shape {
    Index heads, rows, inner, cols;
  };
  for (Shape s : {Shape{11, 3, 5, 4}, Shape{5, 20, 3, 2}, Shape{3, 70, 9, 40}, Shape{50, 100, 6, 64},
                  Shape{40, 130, 5, 130}}) {
    SCOPED_TRACE(::testing::Message() << s.heads << " products of " << s.rows << " x " << s.inner << " x " << s.cols);
    const auto left = awkwardValues(static_cast<std::size_t>(s.heads * s.rows * s.inner), 5);  // (heads, rows, inner)
    const auto right = awkwardValues(static_cast<std::size_t>(s.heads * s.cols * s.inner), 6);  // (heads, cols, inner)
    auto l = lift(h, left), r = lift(h, right);
    const osprey::Int heads = s.heads, rows = s.rows, inner = s.inner, cols = s.cols;
    const heads::Blocks leftBlocks{heads, heads * rows * inner, rows * inner, 0, inner, 1};
    const heads::Blocks rightTransposed{1, cols * inner, 0, 0, 1, inner};
    const auto got = readAll(h, must(heads::products(h, s.heads, s.rows, s.inner, s.cols, l, leftBlocks, r,
                                                     rightTransposed)));
    std::vector<Scalar> want;
    for (Index head = 0; head < s.heads; ++head)
      for (Index i = 0; i < s.rows; ++i)
        for (Index j = 0; j < s.cols; ++j) {
          Scalar acc = 0.0;
          for (Index k = 0; k < s.inner; ++k)
            acc = std::fma(left[static_cast<std::size_t>((head * s.rows + i) * s.inner + k)],
                           right[static_cast<std::size_t>((head * s.cols + j) * s.inner + k)], acc);
          want.push_back(acc);
        }
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(firstBitDifference(got, want), want.size());
  }
}

// Row folds (fold_rows.hpp) against plain loops: a sum with a finish that reads its row, a running
// maximum from the first term (NaN and signed zeros in the rows), and an order-sensitive combine
// (a - b) from a seed. The shapes straddle the cuda device's 256-term chunks and exceed its grid of
// blocks (more rows than 32 per multiprocessor of an H200), and include empty rows and no rows.
template <class H>
void rowFoldsEqualPlainLoops(H& h) {
  struct Shape {
    Index rows, cols;
  };
  for (Shape s : {Shape{0, 5}, Shape{3, 0}, Shape{1, 1}, Shape{3, 1023}, Shape{2, 1024}, Shape{2, 1025},
                  Shape{1, 2049}, Shape{1100, 3}, Shape{4500, 3}, Shape{4, 3000}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << " rows of " << s.cols);
    auto values = awkwardValues(static_cast<std::size_t>(s.rows * s.cols), 91);
    for (std::size_t i = 4; i < values.size(); i += 97) values[i] = std::numeric_limits<Scalar>::quiet_NaN();
    auto buf = lift(h, values);
    const osprey::View v = buf.view();
    const osprey::Int cols = s.cols;
    const auto term = [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> c) -> KernelScalar<H> {
      return v[osprey::asInt(r) * cols + c];
    };
    const auto at = [&](Index r, Index c) { return values[static_cast<std::size_t>(r * s.cols + c)]; };

    const auto sums = readAll(h, must(sumRows(h, s.rows, s.cols, term,
        [=] OSPREY_FN(KernelIndex<H> r, KernelScalar<H> acc) -> KernelScalar<H> { return acc * 0.5 + osprey::toScalar(r); })));
    const auto differences = readAll(h, must(foldRows(h, s.rows, s.cols, 1.5, term,
        [] OSPREY_FN(KernelScalar<H> a, KernelScalar<H> b) -> KernelScalar<H> { return a - b; }, AsIs{})));
    std::vector<Scalar> wantSums, wantDifferences, wantMaxima;
    for (Index r = 0; r < s.rows; ++r) {
      Scalar sum = 0.0, difference = 1.5, maximum = s.cols > 0 ? at(r, 0) : 0.0;
      for (Index c = 0; c < s.cols; ++c) {
        sum = sum + at(r, c);
        difference = difference - at(r, c);
        if (c > 0 && at(r, c) > maximum) maximum = at(r, c);
      }
      wantSums.push_back(sum * 0.5 + static_cast<Scalar>(r));
      wantDifferences.push_back(difference);
      wantMaxima.push_back(maximum);
    }
    ASSERT_EQ(sums.size(), wantSums.size());
    EXPECT_EQ(firstBitDifference(sums, wantSums), wantSums.size());
    EXPECT_EQ(firstBitDifference(differences, wantDifferences), wantDifferences.size());
    if (s.cols == 0) {
      expectError(foldRowsFromFirst(h, s.rows, s.cols, term, Larger{}, AsIs{}), "needs at least one column");
      continue;
    }
    const auto maxima = readAll(h, must(foldRowsFromFirst(h, s.rows, s.cols, term, Larger{}, AsIs{})));
    EXPECT_EQ(firstBitDifference(maxima, wantMaxima), wantMaxima.size());
  }
}

// Ragged rows (row r holds length(r) terms, some none, some across the 256-term chunks): a sum and
// a maximum from the first term (which an empty row leaves at 0.0, the seed, on every handler).
template <class H>
void raggedRowFoldsEqualPlainLoops(H& h) {
  constexpr Index kRows = 40, kWidth = 2100;
  const auto values = awkwardValues(static_cast<std::size_t>(kRows * kWidth), 93);
  auto buf = lift(h, values);
  const osprey::View v = buf.view();
  const auto length = [] OSPREY_FN(KernelIndex<H> r) -> KernelIndex<H> { return (r * 331) % 2100; };
  const auto term = [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> c) -> KernelScalar<H> {
    return v[osprey::asInt(r) * kWidth + c];
  };
  const auto sums = readAll(h, must(sumRaggedRows(h, kRows, length, term, AsIs{})));
  const auto maxima = readAll(h, must(foldRaggedRowsFromFirst(h, kRows, length, term, Larger{}, AsIs{})));
  std::vector<Scalar> wantSums, wantMaxima;
  for (Index r = 0; r < kRows; ++r) {
    const auto row = values.begin() + r * kWidth;
    const Index count = (r * 331) % 2100;
    Scalar sum = 0.0, maximum = count > 0 ? row[0] : 0.0;
    for (Index c = 0; c < count; ++c) {
      sum = sum + row[c];
      if (c > 0 && row[c] > maximum) maximum = row[c];
    }
    wantSums.push_back(sum);
    wantMaxima.push_back(maximum);
  }
  ASSERT_EQ(sums.size(), wantSums.size());
  EXPECT_EQ(firstBitDifference(sums, wantSums), wantSums.size());
  EXPECT_EQ(firstBitDifference(maxima, wantMaxima), wantMaxima.size());
}

// Many ragged rows (enough that the cuda device folds them a warp a row, a chunk of 256 terms at a
// time; softmax and cross-entropy rows have this shape): a sum, a maximum from the first term and a
// dot product of two tensors per row, against plain loops. Rows differ in length, some are empty,
// and in the second shape some run past several chunks; its row count is just past the warps'
// threshold and not a multiple of the block's eight warps.
template <class H>
void manyRaggedRowFoldsEqualPlainLoops(H& h) {
  struct Shape {
    Index rows, width, stride;  // row r holds (r * stride) % (width + 1) terms, none when r % 7 == 3
  };
  for (Shape s : {Shape{20011, 83, 37}, Shape{2049, 1000, 131}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << " rows of up to " << s.width);
    const Index W = s.width, S = s.stride;
    const auto a = awkwardValues(static_cast<std::size_t>(s.rows * W), 94);
    const auto b = awkwardValues(static_cast<std::size_t>(s.rows * W), 95);
    auto aBuf = lift(h, a), bBuf = lift(h, b);
    const osprey::View x = aBuf.view(), y = bBuf.view();
    const auto length = [=] OSPREY_FN(KernelIndex<H> r) -> KernelIndex<H> {
      return osprey::select(r % 7 == 3, KernelIndex<H>(0), (r * S) % (W + 1));
    };
    const auto term = [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> c) -> KernelScalar<H> {
      return x[osprey::asInt(r) * W + c];
    };
    const auto sums = readAll(h, must(sumRaggedRows(h, s.rows, length, term, AsIs{})));
    const auto maxima = readAll(h, must(foldRaggedRowsFromFirst(h, s.rows, length, term, Larger{}, AsIs{})));
    const auto dots = readAll(h, must(dotRaggedRows(h, s.rows, length,
        [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> c) -> ProductOf<KernelScalar<H>> {
          const auto at = osprey::asInt(r) * W + c;
          return {x[at], y[at]};
        },
        AsIs{})));
    std::vector<Scalar> wantSums, wantMaxima, wantDots;
    for (Index r = 0; r < s.rows; ++r) {
      const auto at = static_cast<std::size_t>(r * W);
      const Index count = r % 7 == 3 ? 0 : (r * S) % (W + 1);
      Scalar sum = 0.0, maximum = count > 0 ? a[at] : 0.0, dot = 0.0;
      for (Index c = 0; c < count; ++c) {
        const auto k = at + static_cast<std::size_t>(c);
        sum = sum + a[k];
        if (c > 0 && a[k] > maximum) maximum = a[k];
        dot = std::fma(a[k], b[k], dot);
      }
      wantSums.push_back(sum);
      wantMaxima.push_back(maximum);
      wantDots.push_back(dot);
    }
    EXPECT_SAME_BITS(sums, wantSums);
    EXPECT_SAME_BITS(maxima, wantMaxima);
    EXPECT_SAME_BITS(dots, wantDots);
  }
}

// Transposes and head gathers (a copy on every handler; the cuda device's tiled strided copy) put
// every element where the plain index maths says, for shapes around its 32 x 32 tiles: a block's
// rows as they are, transposed, and heads of a batch whose stride is not heads x head size.
template <class H>
void transposesAndGathersCopyEveryElement(H& h) {
  struct Shape {
    Index rows, cols;
  };
  for (Shape s : {Shape{1, 1}, Shape{1, 70}, Shape{33, 1}, Shape{31, 33}, Shape{64, 64}, Shape{97, 130}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols);
    const auto values = awkwardValues(static_cast<std::size_t>(s.rows * s.cols), 96);
    const auto got = readAll(h, must(transpose(h, lift(h, values), s.rows, s.cols)));
    std::vector<Scalar> want;
    for (Index j = 0; j < s.cols; ++j)
      for (Index i = 0; i < s.rows; ++i) want.push_back(values[static_cast<std::size_t>(i * s.cols + j)]);
    EXPECT_SAME_BITS(got, want);
  }
  // (B, T, 3C) activations, NH heads of hs channels: the k section's heads as (T, hs) blocks and
  // transposed (hs, T), B x NH blocks in all.
  constexpr Index B = 3, T = 37, NH = 5, hs = 7, C = NH * hs, W = 3 * C;
  const auto qkv = awkwardValues(static_cast<std::size_t>(B * T * W), 97);
  auto src = lift(h, qkv);
  const heads::Layout layout{T, W, NH, hs};
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "transposed heads" : "heads");
    const auto blocks = transposed ? layout.transposed(C) : layout.rows(C);
    const Index rows = transposed ? hs : T, cols = transposed ? T : hs;
    const auto got = readAll(h, must(heads::gatherAll(h, src, blocks, B * NH, rows, cols)));
    std::vector<Scalar> want;
    for (Index b = 0; b < B; ++b)
      for (Index head = 0; head < NH; ++head)
        for (Index r = 0; r < rows; ++r)
          for (Index c = 0; c < cols; ++c) {
            const Index t = transposed ? c : r, d = transposed ? r : c;
            want.push_back(qkv[static_cast<std::size_t>((b * T + t) * W + C + head * hs + d)]);
          }
    EXPECT_SAME_BITS(got, want);
  }
}

// A fault inside a term (here an index product that overflows, in a later row and column) is the
// row fold's error, as in any other kernel.
template <class H>
void rowFoldFaultIsItsError(H& h) {
  const osprey::Int huge = std::numeric_limits<Index>::max() / 2;
  expectError(sumRows(h, 4, 1500,
                      [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> c) -> KernelScalar<H> {
                        return osprey::select((osprey::asInt(r) + c / 1000 + 1) * huge > 0, 1.0, 0.0);
                      },
                      AsIs{}),
              "integer overflow");
  // The same in one of many short rows (folded a warp a row on the cuda device).
  expectError(sumRows(h, 20000, 3,
                      [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> c) -> KernelScalar<H> {
                        return osprey::select((osprey::asInt(r / 15000) + c / 2 + 1) * huge > 0, 1.0, 0.0);
                      },
                      AsIs{}),
              "integer overflow");
}

}  // namespace gpt2::testing::sum_cases
