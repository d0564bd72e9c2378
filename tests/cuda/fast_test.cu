// The fast handler (gpu/fast.hpp, gpt2/fast/) against the exact ones, on the GPU.
//
// Two kinds of checks:
//   * where fast promises the exact arithmetic of float storage (build, zipWith, reduce, indexOf,
//     row maxima), its results equal ListsOf<float>'s bit for bit: the lists handler rounding each
//     stored result to float, the same single rounding;
//   * where it does not (TF32 products, tree-folded sums, and through them the model), the gap to
//     the exact handler stays inside the bound docs/FAST.md states for that quantity. Each test
//     prints the gap it measured, so the table there can be re-derived from any run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpt2/fast/fast_handler.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/model_cases.hpp"
#include "gpt2/train/finite.hpp"
#include "gpt2/train/step.hpp"
#include "handlers.hpp"
#include "train/train_helpers.hpp"

namespace gpt2::testing {
namespace {

using osprey::Fast;
using osprey::GpuCuda;
using osprey::Index;
using osprey::Scalar;
using Narrow = osprey::ListsOf<float>;

FastHandler makeFast() {
  auto f = Fast::open();
  if (!f.ok()) throw std::runtime_error(f.error().message);
  return FastHandler(std::move(*f));
}

template <class T>
T ok(osprey::Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}

// The bytes of device memory at p, for comparisons bit for bit.
std::vector<unsigned char> bitsOf(const void* p, Index bytes) {
  std::vector<unsigned char> bits(static_cast<std::size_t>(bytes));
  EXPECT_EQ(cudaMemcpy(bits.data(), p, bits.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return bits;
}

// ---- Tolerances (docs/FAST.md; each measured gap is printed) -------------------------------------
// A product's element: TF32 rounds each input to 11 significant bits (relative 2^-11 each, so
// 2^-10 a term), and float sums add up to `inner` roundings of 2^-24; relative to Σ|a||b|.
// bf16 keeps 8 significant bits (relative 2^-8 each input, 2^-7 a term); a product of two bf16
// values is exact in float, so the sums' roundings are all that is left once the inputs are bf16.
double productBound(Index inner) {
  return std::ldexp(1.0, -10) + static_cast<double>(inner + 1) * std::ldexp(1.0, -24);
}

// The linear layers' two kinds of products (FastHandler::Products), each with what it rounds: a
// term's relative error (2^-10 for TF32, 2^-7 for bf16 inputs) and, through the model, the largest
// |Δlogit| / largest |logit| (errors add across layers rather than grow: a few times a term's) and
// |Δloss| / loss (the mean of many rows' losses, whose errors partly cancel). bf16 keeps 3 bits
// fewer than TF32, so 8× its rounding: its bounds are about 5× TF32's (the measured gaps, in
// docs/FAST.md, are 5–7× TF32's). Flash attention against the exact handler, on inputs the kind
// holds exactly (termBits + 1 significant bits): p and ds are rounded to the kind (2^-11 or 2^-8
// relative) before their products, which sum them in float: 4 such roundings, 4·2^-8 for bf16
// and 4·2^-11 ≈ 2e-3 for TF32.
//
// linearGap: one linear layer's outputs against the exact products of the same floats, a fraction
// of the largest output. Both kinds round each input to nearest (within 2^-8 for bf16, 2^-11 for
// TF32; cuBLAS's TF32 conversion rounds to nearest, it does not truncate), so a term is within
// twice that, and the terms' errors are independent: an output's error is about a rounding of the
// root of its terms' squares, which is the output's own size. Four roundings of the largest
// output: 2^-6 and 2^-9. A layer that halves its output, or writes nothing, is 0.5 or 1 away.
//
// gradientGap: ‖Δg‖ / ‖g‖ of each gradient tensor of a training step against exact. The backward
// products see the rounding twice (activations and gradients), and each layer's error passes back
// through the ones before it; 8× less rounding for TF32, and 5× less bound, as above.
struct ProductsCase {
  FastHandler::Products products;
  const char* name;
  int termBits;
  double linearGap;
  double logitGap;
  double lossGap;
  double gradientGap;
  double flashGap;
};
constexpr ProductsCase kProductsCases[] = {
    {FastHandler::Products::Bf16, "bf16", 7, 1.0 / 64, 1e-2, 1e-4, 2e-2, 4 * 0.00390625},
    {FastHandler::Products::Tf32, "tf32", 10, 1.0 / 512, 2e-3, 2e-5, 4e-3, 2e-3}};
// Decoding from bf16 copies of the product weights: each weight rounded to 8 significant bits
// (relative error up to 2^-8 ≈ 4e-3), through every block of the model.
constexpr double kHalfWeightLogitGap = 1e-2;

void report(const char* what, double measured, double bound) {
  std::printf("[ measured ] %s: %.3g (bound %.3g)\n", what, measured, bound);
}

// Each quantity's largest gap over a test's cases: checked against its bound case by case, and
// reported once, when the test ends, in report()'s format.
class Gaps {
 public:
  Gaps() = default;
  Gaps(const Gaps&) = delete;
  Gaps& operator=(const Gaps&) = delete;
  ~Gaps() {
    for (const Entry& e : m_entries) report(e.what.c_str(), e.gap, e.bound);
  }
  void check(const std::string& what, double gap, double bound) {
    EXPECT_LT(gap, bound) << what;
    for (Entry& e : m_entries)
      if (e.what == what) {
        e.gap = std::max(e.gap, gap);
        return;
      }
    m_entries.push_back({what, gap, bound});
  }

 private:
  struct Entry {
    std::string what;
    double gap, bound;
  };
  std::vector<Entry> m_entries;
};

// ---- Elementwise work: the exact arithmetic of float storage ---------------------------------------
struct Wave {
  OSPREY_FN Scalar operator()(Index i) const { return static_cast<Scalar>(i % 97) / 7.0 - 6.5 + 1e-9 * static_cast<Scalar>(i); }
};
struct ProductPlusOne {
  OSPREY_FN Scalar operator()(Scalar a, Scalar b) const { return a * b + 1.0; }
};
struct Sum {
  OSPREY_FN Scalar operator()(Scalar acc, Scalar x) const { return acc + x; }
};

template <class H>
std::vector<Scalar> elementwise(H& h, Index n, Scalar* total, Index* found, Scalar probe) {
  auto a = ok(h.build(n, Wave{}));
  auto b = ok(h.zipWith(a, a, ProductPlusOne{}));
  *total = ok(h.reduce(b, 0.25, Sum{}));
  *found = ok(h.indexOf(a, probe));
  return osprey::testing::readAll(h, b);
}

TEST(Fast, NamesItself) {
  auto h = makeFast();
  EXPECT_EQ(h.device().rfind("fast cuda: ", 0), 0u) << h.device();
}

TEST(Fast, ElementwiseEqualsFloatLists) {
  auto fast = makeFast();
  Narrow lists;
  for (Index n : {0, 1, 97, 2049, 100003}) {
    SCOPED_TRACE(n);
    Scalar totalFast = 0, totalLists = 0;
    Index foundFast = -1, foundLists = -1;
    const Scalar probe = static_cast<Scalar>(static_cast<float>(Wave{}(n / 2)));
    const auto got = elementwise(fast, n, &totalFast, &foundFast, probe);
    const auto want = elementwise(lists, n, &totalLists, &foundLists, probe);
    EXPECT_TRUE(osprey::testing::train::sameBits(got, want));
    EXPECT_EQ(std::memcmp(&totalFast, &totalLists, sizeof(Scalar)), 0) << totalFast << " vs " << totalLists;
    EXPECT_EQ(foundFast, foundLists);
  }
}

// ---- Products: within the TF32 bound of the exact product, every layout ------------------------
struct Mixed {
  Index salt;
  OSPREY_FN Scalar operator()(Index i) const {
    const Index k = (i * 7919 + salt * 104729) % 2003;
    return static_cast<Scalar>(k) / 1001.0 - 1.0;
  }
};

struct ScaledMixed {
  Index salt;
  Scalar scale;
  OSPREY_FN Scalar operator()(Index i) const { return Mixed{salt}(i) * scale; }
};

// out (rows x cols) = op(a) · op(b) on the host in doubles, from the same float values.
std::vector<Scalar> hostProduct(const std::vector<Scalar>& a, bool aT, const std::vector<Scalar>& b, bool bT,
                                Index rows, Index inner, Index cols, std::vector<Scalar>* scale) {
  std::vector<Scalar> out(static_cast<std::size_t>(rows * cols));
  scale->assign(out.size(), 0.0);
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      Scalar acc = 0.0, mag = 0.0;
      for (Index k = 0; k < inner; ++k) {
        const Scalar x = aT ? a[k * rows + i] : a[i * inner + k];
        const Scalar y = bT ? b[j * inner + k] : b[k * cols + j];
        acc += x * y;
        mag += std::abs(x * y);
      }
      out[i * cols + j] = acc;
      (*scale)[i * cols + j] = mag;
    }
  return out;
}

TEST(Fast, ProductsWithinTheTf32Bound) {
  auto h = makeFast();
  struct Shape {
    Index rows, inner, cols;
  };
  double worst = 0.0;
  for (Shape s : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{1, 768, 2304}, Shape{64, 768, 50}, Shape{17, 3072, 768},
                  Shape{129, 0, 5}})
    for (bool aT : {false, true})
      for (bool bT : {false, true}) {
        SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.inner << "x" << s.cols << " aT " << aT << " bT " << bT);
        auto a = ok(h.build(s.rows * s.inner, Mixed{1}));
        auto b = ok(h.build(s.inner * s.cols, Mixed{2}));
        auto out = ok(h.allocate(s.rows * s.cols));
        ASSERT_TRUE(h.product(out.data(), {a.data(), aT}, {b.data(), bT}, s.rows, s.inner, s.cols).ok());
        std::vector<Scalar> scale;
        const auto want = hostProduct(osprey::testing::readAll(h, a), aT, osprey::testing::readAll(h, b), bT, s.rows,
                                      s.inner, s.cols, &scale);
        const auto got = osprey::testing::readAll(h, out);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t e = 0; e < got.size(); ++e) {
          const double gap = std::abs(got[e] - want[e]);
          ASSERT_LE(gap, productBound(s.inner) * scale[e] + 1e-30) << "element " << e;
          if (scale[e] > 0) worst = std::max(worst, gap / scale[e]);
        }
      }
  report("product |Δ| / Σ|a·b|", worst, productBound(3072));
}

// b's elements rounded to bf16, in a buffer of their own: a product's bf16 operand.
osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16> halvesOf(FastHandler& h, const FastHandler::Buffer& b) {
  osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16> held(h.runtime(),
                                                            ok(h.runtime()->allocate<__nv_bfloat16>(b.size())), b.size());
  fast_kernels::bf16Copy<<<64, fast_kernels::kTwinThreads, 0, h.stream()>>>(held.data(), b.data(), b.size(), b.size());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  return held;
}

// bf16 operands (osprey::HalfOperand): the inputs are bf16 values already, their products exact in
// float, so only the float sums round: at most (inner + 1)·2^-24 of Σ|a·b| against the same bf16
// values multiplied in double. That worst case has every rounding lean one way; over terms of
// either sign the sums' errors grow far slower with inner, so past inner = 511 the bound is capped
// at 2^-15 of Σ|a·b| (512 roundings).
double halfProductBound(Index inner) {
  return std::min(static_cast<double>(inner + 1) * std::ldexp(1.0, -24), std::ldexp(1.0, -15));
}
TEST(Fast, Bf16ProductsWithinTheFloatSumBound) {
  auto h = makeFast();
  struct Shape {
    Index rows, inner, cols;
  };
  const auto rounded = [](std::vector<Scalar> v) {
    for (Scalar& x : v) x = static_cast<Scalar>(__bfloat162float(__float2bfloat16_rn(static_cast<float>(x))));
    return v;
  };
  double worst = 0.0, worstHalf = 0.0;
  for (Shape s : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{64, 768, 50}, Shape{17, 3072, 768}, Shape{129, 0, 5}})
    for (bool aT : {false, true})
      for (bool bT : {false, true}) {
        SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.inner << "x" << s.cols << " aT " << aT << " bT " << bT);
        auto a = ok(h.build(s.rows * s.inner, Mixed{3}));
        auto b = ok(h.build(s.inner * s.cols, Mixed{4}));
        const auto a16 = halvesOf(h, a), b16 = halvesOf(h, b);
        auto out = ok(h.allocate(s.rows * s.cols));
        ASSERT_TRUE(h.product(out.data(), osprey::HalfOperand{a16.data(), aT}, osprey::HalfOperand{b16.data(), bT},
                              s.rows, s.inner, s.cols)
                        .ok());
        std::vector<Scalar> scale;
        const auto want = hostProduct(rounded(osprey::testing::readAll(h, a)), aT,
                                      rounded(osprey::testing::readAll(h, b)), bT, s.rows, s.inner, s.cols, &scale);
        const auto got = osprey::testing::readAll(h, out);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t e = 0; e < got.size(); ++e) {
          const double gap = std::abs(got[e] - want[e]);
          ASSERT_LE(gap, halfProductBound(s.inner) * scale[e] + 1e-30) << "element " << e;
          if (scale[e] > 0) worst = std::max(worst, gap / scale[e]);
        }
        // Into a bf16 output (a buffer stored as bf16): float sums rounded to bf16 (8 significant
        // bits: within 2^-8 of the value). cuBLASLt may sum a bf16 output in parts, each part
        // rounded to bf16 before they are added (measured: up to about 2^-7 of Σ|a·b| where the
        // sum cancels), so the bound is 2^-8 of the value plus 2^-8 of Σ|a·b|.
        if (s.inner == 0) continue;
        __nv_bfloat16* p = ok(h.runtime()->allocate<__nv_bfloat16>(s.rows * s.cols));
        osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16> out16(h.runtime(), p, s.rows * s.cols);
        ASSERT_TRUE(ok(h.productToHalves(p, osprey::HalfOperand{a16.data(), aT}, osprey::HalfOperand{b16.data(), bT},
                                         s.rows, s.inner, s.cols)));
        std::vector<__nv_bfloat16> got16(static_cast<std::size_t>(s.rows * s.cols));
        ASSERT_EQ(cudaMemcpy(got16.data(), p, got16.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (std::size_t e = 0; e < got16.size(); ++e) {
          const double gap = std::abs(static_cast<double>(__bfloat162float(got16[e])) - want[e]);
          const double bound = std::ldexp(1.0, -8) * (std::abs(want[e]) + scale[e]) +
                               static_cast<double>(s.inner + 1) * std::ldexp(1.0, -24) * scale[e];
          ASSERT_LE(gap, bound * (1.0 + 1e-6) + 1e-30) << "bf16 output, element " << e;
          if (scale[e] > 0) worstHalf = std::max(worstHalf, gap / scale[e]);
        }
      }
  report("bf16 product |Δ| / Σ|a·b| (bf16 inputs)", worst, halfProductBound(3072));
  std::printf("[ measured ] bf16 product into bf16, |Δ| / Σ|a·b|: %.3g (bound 2^-8 of the value + 2^-8 = %.3g)\n",
              worstHalf, std::ldexp(1.0, -8));
}

// Products whose cuBLASLt algorithm is chosen by timing (osprey/gpu/cuda/lt_choices.hpp) give the bits
// of the heuristic's first candidate: each kind of product the layers run, at sizes where the
// heuristic offers several candidates (and where the weight gradient's product splits k). A shape
// is chosen once; later products of it reuse the choice.
TEST(Fast, TunedProductsKeepTheFirstCandidatesBits) {
  auto h = makeFast();
  using Halves = osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16>;
  struct Shape {
    Index rows, inner, cols;
    bool aT, bT;
  };
  for (Shape s : {Shape{2048, 768, 2304, false, false}, Shape{2048, 3072, 768, false, false},
                  Shape{2048, 768, 3072, false, true}, Shape{768, 8192, 768, true, false},
                  Shape{1024, 768, 8192, false, true}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.inner << "x" << s.cols << " aT " << s.aT << " bT " << s.bT);
    ASSERT_GE(static_cast<double>(s.rows * s.inner * s.cols), osprey::LtChoices::kTimedWork);  // large enough to time
    const auto a16 = halvesOf(h, ok(h.build(s.rows * s.inner, Mixed{5})));
    const auto b16 = halvesOf(h, ok(h.build(s.inner * s.cols, Mixed{6})));
    auto bias = ok(h.build(s.cols, Mixed{7})), addend = ok(h.build(s.rows * s.cols, Mixed{8}));
    const osprey::HalfOperand a{a16.data(), s.aT}, b{b16.data(), s.bT};
    // The bits of each kind of product: plain, plus bias and addend, into bf16.
    const auto products = [&] {
      std::vector<std::vector<unsigned char>> all;
      const Index n = s.rows * s.cols;
      auto out = ok(h.allocate(n));
      Halves out16(h.runtime(), ok(h.runtime()->allocate<__nv_bfloat16>(n)), n);
      EXPECT_TRUE(h.product(out.data(), a, b, s.rows, s.inner, s.cols).ok());
      all.push_back(bitsOf(out.data(), n * 4));
      EXPECT_TRUE(ok(h.productPlusBias(out.data(), a, b, s.rows, s.inner, s.cols, bias.data(), addend.data())));
      all.push_back(bitsOf(out.data(), n * 4));
      EXPECT_TRUE(ok(h.productToHalves(out16.data(), a, b, s.rows, s.inner, s.cols)));
      all.push_back(bitsOf(out16.data(), n * 2));
      return all;
    };
    h.setProductTuning(false);
    const std::size_t chosenBefore = h.productShapesChosen();
    const auto first = products();
    EXPECT_EQ(h.productShapesChosen(), chosenBefore);  // nothing kept with tuning off
    h.setProductTuning(true);
    const auto tuned = products();
    const std::size_t chosen = h.productShapesChosen();
    EXPECT_EQ(chosen, chosenBefore + 3);  // one shape for each kind of product
    const auto again = products();
    EXPECT_EQ(h.productShapesChosen(), chosen);  // chosen once
    for (std::size_t k = 0; k < first.size(); ++k) {
      EXPECT_TRUE(tuned[k] == first[k]) << "product kind " << k << " differs from the first candidate's";
      EXPECT_TRUE(again[k] == first[k]) << "product kind " << k << " differs on its second tuned run";
    }
  }
  EXPECT_GT(h.productShapesTimed(), 0u);  // at these sizes the heuristic offers candidates to time
  std::printf("[ measured ] product shapes chosen %zu, by timing %zu\n", h.productShapesChosen(),
              h.productShapesTimed());
}

TEST(Fast, MatMulAndBatchedProductsAgree) {
  auto h = makeFast();
  const Index batch = 12, rows = 33, inner = 64, cols = 40;
  auto a = ok(h.build(batch * rows * inner, Mixed{3}));
  auto b = ok(h.build(batch * inner * cols, Mixed{4}));
  const auto together = osprey::testing::readAll(h, ok(h.matMulBatched(a, b, batch, rows, inner, cols)));
  const auto av = osprey::testing::readAll(h, a), bv = osprey::testing::readAll(h, b);
  double worst = 0.0;
  for (Index p = 0; p < batch; ++p) {
    std::vector<Scalar> scale;
    const std::vector<Scalar> ap(av.begin() + p * rows * inner, av.begin() + (p + 1) * rows * inner);
    const std::vector<Scalar> bp(bv.begin() + p * inner * cols, bv.begin() + (p + 1) * inner * cols);
    const auto want = hostProduct(ap, false, bp, false, rows, inner, cols, &scale);
    for (Index e = 0; e < rows * cols; ++e) {
      const double gap = std::abs(together[p * rows * cols + e] - want[e]);
      ASSERT_LE(gap, productBound(inner) * scale[e]) << p << " " << e;
      if (scale[e] > 0) worst = std::max(worst, gap / scale[e]);
    }
  }
  report("batched product |Δ| / Σ|a·b|", worst, productBound(inner));
  auto bad = h.matMulBatched(a, b, batch, rows + 1, inner, cols);
  ASSERT_FALSE(bad.ok());
}

// Attention's per-head products read their operands in place (FastHandler::headProducts): every
// layout attention uses, against the exact per-head products of the same float values.
struct Magnitude {
  osprey::View x;
  OSPREY_FN Scalar operator()(Index i) const { return x[i] < 0 ? -x[i] : x[i]; }
};
TEST(Fast, HeadProductsReadEveryLayoutInPlace) {
  auto fast = makeFast();
  osprey::Lists exact;
  const Index B = 2, T = 5, NH = 3, hs = 4, C = NH * hs, BH = B * NH;
  const heads::Layout qkvHeads{T, 3 * C, NH, hs}, outHeads{T, C, NH, hs};
  const osprey::Int NHi = NH, Ti = T;
  auto qkvFast = ok(fast.build(B * T * 3 * C, Mixed{6}));
  auto squareFast = ok(fast.build(BH * T * T, Mixed{7}));
  auto doutFast = ok(fast.build(B * T * C, Mixed{8}));
  auto onLists = [&](const FastHandler::Buffer& b) {
    const auto values = osprey::testing::readAll(fast, b);
    return ok(exact.fromList(std::span<const Scalar>(values)));
  };
  auto absOf = [&](const osprey::Lists::Buffer& b) { return ok(exact.build(exact.length(b), Magnitude{b.view()})); };
  const auto qkv = onLists(qkvFast), square = onLists(squareFast), dout = onLists(doutFast);
  const auto qkvAbs = absOf(qkv), squareAbs = absOf(square), doutAbs = absOf(dout);
  struct Case {
    const char* name;
    Index rows, inner, cols;
    const FastHandler::Buffer *leftFast, *rightFast;
    const osprey::Lists::Buffer *left, *right, *leftAbs, *rightAbs;
    heads::Blocks l, r;
  };
  const Case cases[] = {
      {"scores q·kᵀ", T, hs, T, &qkvFast, &qkvFast, &qkv, &qkv, &qkvAbs, &qkvAbs, qkvHeads.rows(0), qkvHeads.transposed(C)},
      {"out att·v", T, T, hs, &squareFast, &qkvFast, &square, &qkv, &squareAbs, &qkvAbs, heads::squareRows(NHi, Ti),
       qkvHeads.rows(2 * C)},
      {"datt dout·vᵀ", T, hs, T, &doutFast, &qkvFast, &dout, &qkv, &doutAbs, &qkvAbs, outHeads.rows(0),
       qkvHeads.transposed(2 * C)},
      {"dk dscoreᵀ·q", T, T, hs, &squareFast, &qkvFast, &square, &qkv, &squareAbs, &qkvAbs,
       heads::squareColumns(NHi, Ti), qkvHeads.rows(0)},
  };
  double worst = 0.0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto got = osprey::testing::readAll(
        fast, ok(heads::products(fast, BH, c.rows, c.inner, c.cols, *c.leftFast, c.l, *c.rightFast, c.r)));
    const auto want = osprey::testing::readAll(
        exact, ok(heads::products(exact, BH, c.rows, c.inner, c.cols, *c.left, c.l, *c.right, c.r)));
    const auto scale = osprey::testing::readAll(
        exact, ok(heads::products(exact, BH, c.rows, c.inner, c.cols, *c.leftAbs, c.l, *c.rightAbs, c.r)));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t e = 0; e < got.size(); ++e) {
      const double gap = std::abs(got[e] - want[e]);
      ASSERT_LE(gap, productBound(c.inner) * scale[e] + 1e-30) << "element " << e;
      if (scale[e] > 0) worst = std::max(worst, gap / scale[e]);
    }
  }
  report("per-head product |Δ| / Σ|a·b|", worst, productBound(std::max(hs, T)));
}

// ---- Row folds: maxima exact, sums within float rounding of a tree -------------------------------
struct RowTerm {
  osprey::ViewOf<float> x;
  Index cols;
  OSPREY_FN Scalar operator()(Index r, Index c) const { return x[r * cols + c]; }
};
template <class H>
std::pair<std::vector<Scalar>, std::vector<Scalar>> rowStats(H& h, Index rows, Index cols) {
  auto x = ok(h.build(rows * cols, Mixed{5}));
  const RowTerm term{x.view(), cols};
  auto sums = ok(sumRows(h, rows, cols, term, AsIs{}));
  auto maxima = ok(foldRowsFromFirst(h, rows, cols, term, Larger{}, AsIs{}));
  return {osprey::testing::readAll(h, sums), osprey::testing::readAll(h, maxima)};
}

TEST(Fast, RowFoldsAsTrees) {
  auto fast = makeFast();
  Narrow lists;
  double worst = 0.0;
  for (Index cols : {1, 31, 768, 1025, 50257}) {
    SCOPED_TRACE(cols);
    const Index rows = cols > 1000 ? 9 : 300;
    const auto [sumsFast, maxFast] = rowStats(fast, rows, cols);
    const auto [sumsLists, maxLists] = rowStats(lists, rows, cols);
    EXPECT_TRUE(osprey::testing::train::sameBits(maxFast, maxLists));
    for (Index r = 0; r < rows; ++r) {
      // Both are double sums of the same floats, then one rounding to float: the grouping moves
      // the double sum by at most cols · 2^-53 · Σ|x| (Σ|x| <= cols), the rounding 2^-24 of it.
      const double bound = std::ldexp(std::abs(sumsLists[r]), -23) + static_cast<double>(cols * cols) * std::ldexp(1.0, -52);
      ASSERT_LE(std::abs(sumsFast[r] - sumsLists[r]), bound) << "row " << r;
      worst = std::max(worst, std::abs(sumsFast[r] - sumsLists[r]) / bound);
    }
  }
  report("row sum |Δ|, a fraction of its row's bound", worst, 1.0);
}

// ---- The model: fast against exact within docs/FAST.md's tolerances ---------------------------------
double largestAbs(const std::vector<Scalar>& v) {
  double m = 0.0;
  for (Scalar x : v) m = std::max(m, std::abs(x));
  return m;
}
double largestGap(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}
double relativeNormGap(const std::vector<Scalar>& got, const std::vector<Scalar>& want) {
  double d = 0.0, n = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    d += (got[i] - want[i]) * (got[i] - want[i]);
    n += want[i] * want[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

// ---- Fused layers against their reference definitions, on the same handler and inputs -----------
// The reference runs on the fast handler too (double arithmetic over the same floats), so the gap
// is the fused kernel's own: float arithmetic and its grouping of sums (and TF32 in attention).
// Each gap is a fraction of the reference's largest value, so an output left at zero, or halved,
// is 1 or 0.5 away.
double relativeGap(const std::vector<Scalar>& got, const std::vector<Scalar>& want) {
  return largestGap(got, want) / std::max(largestAbs(want), 1e-30);
}
// Float kernels: each output a few float operations (2^-24 each), sums grouped by warps, and the
// special-function unit's exp2 and reciprocal (about 2^-22 each): a few 2^-24 of the largest
// value. The bound is 2e-6, about 34·2^-24.
constexpr double kFusedFloatGap = 2e-6;
// The residual LayerNorm's dx adds dresid to the layer's dx: where the two nearly cancel, the float
// sum keeps the float roundings of the larger terms, so its gap to the largest |dx| is an order
// larger (2.22e-6 measured on the H200 at c06a814): bounded at 9x that.
constexpr double kFusedResidualGap = 2e-5;
// Attention at head sizes other than 64, out and dqkv: the float softmax, then TF32 products on
// both sides, of the same operands but the softmax's. Where the fused and the reference softmax
// differ by a float rounding, the TF32 rounding of that probability (or of its ds) may differ by a
// whole TF32 step, up to 2^-10 of one term of an output: over rows of up to 64 terms, up to about
// 3e-5 of the largest output. The bound is 1e-4.
constexpr double kFusedAttentionGap = 1e-4;

TEST(Fast, FusedLayersMatchTheirReferences) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  Gaps gaps;
  // GPT-2's widths 768, 1024, 1280 and 1600 held in registers (6, 8, 10 and 13 groups a lane);
  // 1, 31, 1602 (not a multiple of 4) and 2052 (wider than 13 groups) walked.
  for (Index C : {1, 31, 768, 1024, 1280, 1600, 1602, 2052}) {
    SCOPED_TRACE(::testing::Message() << "C " << C);
    const Index N = 37;
    auto x = ok(h.build(N * C, Mixed{11})), w = ok(h.build(C, Mixed{12})), b = ok(h.build(C, Mixed{13}));
    auto dout = ok(h.build(N * C, Mixed{14}));
    const auto fused = ok(h.layernormForward(x, w, b, N, C));
    const auto ref = ok(reference::layernormForward(h, x, w, b, N, C));
    gaps.check("layernorm out fused vs reference", relativeGap(read(fused.out), read(ref.out)), kFusedFloatGap);
    gaps.check("layernorm rstd fused vs reference", relativeGap(read(fused.rstd), read(ref.rstd)), kFusedFloatGap);
    const auto g = ok(h.layernormBackward(dout, x, w, fused.mean, fused.rstd, N, C));
    const auto gr = ok(reference::layernormBackward(h, dout, x, w, ref.mean, ref.rstd, N, C));
    // One channel normalises to 0 (its gradient dx is rounding noise on both sides).
    if (C > 1) gaps.check("layernorm dx fused vs reference", relativeGap(read(g.dx), read(gr.dx)), kFusedFloatGap);
    gaps.check("layernorm dw fused vs reference", relativeGap(read(g.dw), read(gr.dw)), kFusedFloatGap);
    gaps.check("layernorm db fused vs reference", relativeGap(read(g.db), read(gr.db)), kFusedFloatGap);
    // The residual stream's gradient added onto dx inside the kernel (dresid + dx): as close to
    // the reference's sum as dx is, plus the sum's one float rounding.
    auto dresid = ok(h.build(N * C, Mixed{30}));
    const auto rg = ok(h.residualLayernormBackward(dresid, dout, x, w, fused.mean, fused.rstd, N, C));
    const auto rgr = ok(reference::residualLayernormBackward(h, dresid, dout, x, w, ref.mean, ref.rstd, N, C));
    gaps.check("residual layernorm dx fused vs reference", relativeGap(read(rg.dx), read(rgr.dx)), kFusedResidualGap);
    gaps.check("residual layernorm dw fused vs reference", relativeGap(read(rg.dw), read(rgr.dw)), kFusedFloatGap);
    gaps.check("residual layernorm db fused vs reference", relativeGap(read(rg.db), read(rgr.db)), kFusedFloatGap);
    EXPECT_GT(relativeGap(read(rg.dx), read(g.dx)), 0.1);  // dresid was added
  }
  // GELU on [-1, 1], and on [-12, 12], where its gate 1 / (1 + exp(-2u)) reaches 0 (exp(-2u) = inf
  // below about x = -10) and 1: no NaN where tanh u = ±1.
  for (Scalar scale : {1.0, 12.0}) {
    SCOPED_TRACE(::testing::Message() << "gelu on [-" << scale << ", " << scale << "]");
    auto x = ok(h.build(3 * 3072 + 5, ScaledMixed{15, scale})), dout = ok(h.build(3 * 3072 + 5, Mixed{16}));
    const auto y = read(ok(h.geluForward(x))), dx = read(ok(h.geluBackward(dout, x)));
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](Scalar v) { return std::isfinite(v); }));
    EXPECT_TRUE(std::all_of(dx.begin(), dx.end(), [](Scalar v) { return std::isfinite(v); }));
    const std::string on = fmt::format(" on [-{}, {}]", scale, scale);
    gaps.check("gelu forward fused vs reference" + on, relativeGap(y, read(ok(reference::geluForward(h, x)))),
               kFusedFloatGap);
    gaps.check("gelu backward fused vs reference" + on,
               relativeGap(dx, read(ok(reference::geluBackward(h, dout, x)))), kFusedFloatGap);
  }
  for (Index V : {1, 5, 50257, 70000}) {  // 70,000: more than shared memory holds of a row
    SCOPED_TRACE(::testing::Message() << "V " << V);
    const Index N = 9;
    auto logits = ok(h.build(N * V, Mixed{17}));
    std::vector<Scalar> ids;
    for (Index n = 0; n < N; ++n) ids.push_back(static_cast<Scalar>((n * 7919) % V));
    auto targets = ok(h.fromList(std::span<const Scalar>(ids)));
    const auto fused = ok(h.crossEntropyForward(logits, targets, N, V));
    const auto ref = ok(reference::crossEntropyForward(h, logits, targets, N, V));
    gaps.check("cross-entropy probabilities fused vs reference", relativeGap(read(fused.probs), read(ref.probs)),
               kFusedFloatGap);
    // A row's loss is of the order of log V: the losses' scale where every one is 0 (V = 1).
    const auto losses = read(ref.losses);
    gaps.check("cross-entropy losses fused vs reference",
               largestGap(read(fused.losses), losses) / std::max(largestAbs(losses), std::log(V + 1.0)),
               kFusedFloatGap);
    gaps.check("cross-entropy backward fused vs reference",
               relativeGap(read(ok(h.crossEntropyBackward(fused.probs, targets, N, V, 1.0 / N))),
                           read(ok(reference::crossEntropyBackward(h, ref.probs, targets, N, V, 1.0 / N)))),
               kFusedFloatGap);
    // A target outside [0, V) is the reference's fault, not a read past the row.
    std::vector<Scalar> bad(ids);
    bad[N / 2] = static_cast<Scalar>(V);
    auto badTargets = ok(h.fromList(std::span<const Scalar>(bad)));
    auto refused = h.crossEntropyForward(logits, badTargets, N, V);
    if (refused.ok()) {  // a deferred fault surfaces at the next read-back
      auto flushed = h.runtime()->flush();
      ASSERT_FALSE(flushed.ok());
      EXPECT_NE(flushed.error().message.find("index out of range"), std::string::npos) << flushed.error().message;
    } else {
      EXPECT_NE(refused.error().message.find("index out of range"), std::string::npos) << refused.error().message;
    }
  }
  // The linear layers, including the padded path of an output width that is not a multiple of 4
  // (the lm head's V), against the reference definitions on the exact handler from the same
  // floats: each output within its kind's linearGap of its largest value. dbias is float sums of
  // dout's bf16 values (bf16 products, in dw's epilogue: each term rounded once, as the products'
  // inputs are) or of its floats (TF32 products: the float kernels' bound).
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  const auto onExact = [&](const FastHandler::Buffer& b) {
    const auto values = read(b);
    return ok(exact.fromList(std::span<const Scalar>(values)));
  };
  const auto readExact = [&](const auto& b) { return osprey::testing::readAll(exact, b); };
  for (const ProductsCase& c : kProductsCases)
  for (Index OC : {48, 1027}) {
    SCOPED_TRACE(::testing::Message() << c.name << " OC " << OC);
    h.setProducts(c.products);
    const Index N = 64, IC = 40;
    auto x = ok(h.build(N * IC, Mixed{23})), wt = ok(h.build(OC * IC, Mixed{24})), dout = ok(h.build(N * OC, Mixed{25}));
    auto bias = ok(h.build(OC, Mixed{26})), stream = ok(h.build(N * OC, Mixed{31}));
    const auto xe = onExact(x), wte = onExact(wt), de = onExact(dout), be = onExact(bias), se = onExact(stream);
    const auto check = [&](const char* what, const FastHandler::Buffer& got, const osprey::GpuCuda::Buffer& want,
                           double bound) {
      gaps.check(fmt::format("{} linear layer {} vs exact", c.name, what), relativeGap(read(got), readExact(want)),
                 bound);
    };
    check("out (transposed weight)", ok(h.matmulForwardTransposed(x, wt, N, IC, OC)),
          ok(reference::matmulForwardTransposed(exact, xe, wte, N, IC, OC)), c.linearGap);
    const auto g = ok(h.matmulBackwardTransposed(dout, x, wt, N, IC, OC));
    const auto ge = ok(reference::matmulBackwardTransposed(exact, de, xe, wte, N, IC, OC));
    ASSERT_EQ(h.length(g.dwt), OC * IC);
    check("dx (transposed weight)", g.dx, ge.dx, c.linearGap);
    check("dwt", g.dwt, ge.dwt, c.linearGap);
    // Conv1D layout: w (IC, OC) is wtᵀ's values read as (IC, OC).
    check("out", ok(h.matmulForward(x, wt, bias, N, IC, OC)),
          ok(reference::matmulForward(exact, xe, wte, be, N, IC, OC)), c.linearGap);
    // The residual stream added in the product's epilogue: one more float rounding.
    check("out plus the residual stream", ok(h.residualMatmulForward(stream, x, wt, bias, N, IC, OC)),
          ok(reference::residualMatmulForward(exact, se, xe, wte, be, N, IC, OC)), c.linearGap);
    const auto m = ok(h.matmulBackward(dout, x, wt, N, IC, OC));
    const auto me = ok(reference::matmulBackward(exact, de, xe, wte, N, IC, OC));
    check("dx", m.dx, me.dx, c.linearGap);
    check("dw", m.dw, me.dw, c.linearGap);
    check("dbias", m.dbias, me.dbias, kFusedFloatGap);  // float sums of dout's floats with either product
  }
  {  // The settings differ: on one layer, bf16 operands leave a larger gap than TF32's.
    const Index N = 64, IC = 40, OC = 48;
    auto x = ok(h.build(N * IC, Mixed{27})), w = ok(h.build(IC * OC, Mixed{28})), bias = ok(h.build(OC, Mixed{29}));
    const auto want = read(ok(reference::matmulForward(h, x, w, bias, N, IC, OC)));
    std::vector<double> layerGaps;
    for (const ProductsCase& c : kProductsCases) {
      h.setProducts(c.products);
      layerGaps.push_back(largestGap(read(ok(h.matmulForward(x, w, bias, N, IC, OC))), want));
    }
    EXPECT_GT(layerGaps[0], 2.0 * layerGaps[1]) << "bf16 " << layerGaps[0] << ", tf32 " << layerGaps[1];
    std::printf("[ measured ] one layer's largest |Δ| against TF32 products' reference: bf16 %.3g, tf32 %.3g\n",
                layerGaps[0], layerGaps[1]);
  }
  h.setProducts(FastHandler::Products::Bf16);
  for (bool decay : {false, true}) {
    const Index n = 4099;
    auto p = ok(h.build(n, Mixed{20})), g = ok(h.build(n, Mixed{21})), m = ok(h.build(n, Mixed{22}));
    auto v = ok(h.build(n, Wave{}));
    auto vPositive = ok(h.zipWith(v, v, ProductPlusOne{}));  // second moments are >= 0
    const auto fused = ok(h.adamwUpdate(p, g, m, vPositive, 3, 1e-3, 0.9, 0.95, 1e-8, 0.1, decay));
    const auto ref = ok(reference::adamwUpdate(h, p, g, m, vPositive, 3, 1e-3, 0.9, 0.95, 1e-8, 0.1, decay));
    gaps.check("adamw parameter fused vs reference", relativeGap(read(fused.param), read(ref.param)), kFusedFloatGap);
    gaps.check("adamw m fused vs reference", relativeGap(read(fused.m), read(ref.m)), kFusedFloatGap);
    gaps.check("adamw v fused vs reference", relativeGap(read(fused.v), read(ref.v)), kFusedFloatGap);
    // The update writes the new parameter's twin: a product reads from it exactly what it reads
    // from a copy of the floats, whose twin is made afresh.
    auto copy = ok(h.fromList(std::span<const Scalar>(read(fused.param))));
    auto w = ok(h.build(n, Mixed{36})), bias = ok(h.build(1, Mixed{37}));
    EXPECT_SAME_BITS(read(ok(h.matmulForward(fused.param, w, bias, 1, n, 1))), read(ok(h.matmulForward(copy, w, bias, 1, n, 1))));
  }
  for (Index T : {1, 7, 64}) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    const Index B = 2, NH = 3, hs = 8, C = NH * hs;
    auto qkv = ok(h.build(B * T * 3 * C, Mixed{18})), dout = ok(h.build(B * T * C, Mixed{19}));
    const auto fused = ok(h.attentionForward(qkv, B, T, C, NH));
    const auto ref = ok(reference::attentionForward(h, qkv, B, T, C, NH));
    gaps.check("attention out fused vs reference", relativeGap(read(fused.out), read(ref.out)), kFusedAttentionGap);
    // The probabilities themselves: the float softmax of the same TF32 scores.
    gaps.check("attention probabilities fused vs reference", relativeGap(read(fused.att), read(ref.att)),
               kFusedFloatGap);
    const auto dqkv = read(ok(h.attentionBackward(dout, qkv, fused.att, B, T, C, NH)));
    const auto dqkvRef = read(ok(reference::attentionBackward(h, dout, qkv, ref.att, B, T, C, NH)));
    gaps.check("attention backward fused vs reference", relativeGap(dqkv, dqkvRef), kFusedAttentionGap);
  }
}

// With bf16 products, the outputs this handler's layers read only as bf16 (the LayerNorm's, GELU's
// both ways, attention's input gradient) are stored and written as their twins alone, and their
// floats made only when something reads them (FastHandler::twinOnly): the same floats the layer
// writes at once with the deferral off, bit for bit, and the same twin (a product reads the same
// bits from it).
TEST(Fast, DeferredFloatsAreTheLayersOwn) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const Index N = 37, C = 768, B = 2, T = 130, NH = 2, AC = NH * 64;
  ASSERT_TRUE(fast_kernels::flashFits(B, AC, NH));
  auto x = ok(h.build(N * C, Mixed{40})), w = ok(h.build(C, Mixed{41})), b = ok(h.build(C, Mixed{42}));
  auto f = ok(h.build(N * C, Mixed{43})), df = ok(h.build(N * C, Mixed{44}));
  auto qkv = ok(h.build(B * T * 3 * AC, Mixed{45})), dout = ok(h.build(B * T * AC, Mixed{46}));
  auto weight = ok(h.build(C * 8, Mixed{47})), bias = ok(h.build(8, Mixed{48}));
  auto wide = ok(h.build(3 * AC * 8, Mixed{49}));
  struct Outputs {
    FastHandler::Buffer norm, gelu, dgelu, dqkv;
  };
  const auto layers = [&] {
    const auto attention = ok(h.attentionForward(qkv, B, T, AC, NH));
    return Outputs{ok(h.layernormForward(x, w, b, N, C)).out, ok(h.geluForward(f)), ok(h.geluBackward(df, f)),
                   ok(h.attentionBackward(dout, qkv, attention.att, B, T, AC, NH))};
  };
  // What a linear layer reads from each: its twin.
  const auto products = [&](const Outputs& o) {
    return std::vector<std::vector<Scalar>>{read(ok(h.matmulForward(o.norm, weight, bias, N, C, 8))),
                                            read(ok(h.matmulForward(o.gelu, weight, bias, N, C, 8))),
                                            read(ok(h.matmulForward(o.dgelu, weight, bias, N, C, 8))),
                                            read(ok(h.matmulForward(o.dqkv, wide, bias, B * T, 3 * AC, 8)))};
  };
  h.setDeferredFloats(false);
  const Outputs eager = layers();
  for (const auto& o : {eager.norm, eager.gelu, eager.dgelu, eager.dqkv}) EXPECT_FALSE(o.deferred());
  const auto eagerProducts = products(eager);
  h.setDeferredFloats(true);
  const Outputs deferred = layers();
  const osprey::Index before = h.deferredFloatsWritten();
  const FastHandler::Buffer outputs[] = {deferred.norm, deferred.gelu, deferred.dgelu, deferred.dqkv};
  for (const auto& o : outputs) EXPECT_TRUE(o.deferred());
  const auto deferredProducts = products(deferred);  // from the twins alone
  ASSERT_EQ(deferredProducts.size(), eagerProducts.size());
  for (std::size_t k = 0; k < eagerProducts.size(); ++k) EXPECT_SAME_BITS(deferredProducts[k], eagerProducts[k]);
  EXPECT_EQ(h.deferredFloatsWritten(), before);
  const FastHandler::Buffer eagerOutputs[] = {eager.norm, eager.gelu, eager.dgelu, eager.dqkv};
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(::testing::Message() << "output " << k);
    EXPECT_SAME_BITS(read(outputs[k]), read(eagerOutputs[k]));
    EXPECT_FALSE(outputs[k].deferred());
    EXPECT_EQ(h.deferredFloatsWritten(), before + k + 1);
  }
  // A part reads the whole buffer's floats, once; TF32 products write the floats at once.
  auto norm = ok(h.layernormForward(x, w, b, N, C)).out;
  const auto eagerNorm = read(eager.norm);
  EXPECT_SAME_BITS(read(norm.part(C, C)), std::vector<Scalar>(eagerNorm.begin() + C, eagerNorm.begin() + 2 * C));
  EXPECT_FALSE(norm.deferred());
  EXPECT_EQ(h.deferredFloatsWritten(), before + 5);
  // Until then the floats take no memory: a deferred output holds its bf16 twin alone.
  const auto grown = [&](bool deferFloats) {
    h.setDeferredFloats(deferFloats);
    auto* device = h.runtime().get();
    device->resetPeak();
    const std::size_t before = device->peakLiveBytes();
    const auto y = ok(h.geluForward(f));
    return device->peakLiveBytes() - before;
  };
  const auto floatBytes = static_cast<std::size_t>(N * C) * sizeof(float);
  EXPECT_LT(grown(true), floatBytes);
  EXPECT_GE(grown(false), floatBytes);
  h.setDeferredFloats(true);
  h.setProducts(FastHandler::Products::Tf32);
  EXPECT_FALSE(ok(h.geluForward(f)).deferred());
  // A deferred output read after its handler is gone: the launch holds what it reads.
  FastHandler::Buffer orphan;
  {
    auto other = makeFast();
    const auto attention = ok(other.attentionForward(qkv, B, T, AC, NH));
    orphan = ok(other.attentionBackward(dout, qkv, attention.att, B, T, AC, NH));
  }
  EXPECT_TRUE(orphan.deferred());
  EXPECT_SAME_BITS(read(orphan), read(eager.dqkv));
}

// Whether v is a bf16 value: rounded to bf16, it keeps its bits.
bool isBf16Value(Scalar v) {
  const auto rounded = static_cast<Scalar>(__bfloat162float(__float2bfloat16_rn(static_cast<float>(v))));
  return std::memcmp(&rounded, &v, sizeof v) == 0;
}
// A linear layer's outputs stored as bf16 against the reference (TF32 products) of the same floats,
// a fraction of the largest output: each kind's linear-layer bound (linearGap), and the output's
// and the bias's roundings to bf16 (cuBLASLt adds a bf16 output's bias in bf16), each within 2^-8
// of the largest output (|bias| is below it).
constexpr double kStoredBf16Gap = kProductsCases[0].linearGap + kProductsCases[1].linearGap + 2 * 0.00390625;

// The linear layer in front of flash attention with bf16 products: qkv is stored as bf16 (the
// product's own bf16 output, the bias rounded to bf16 as cuBLASLt adds it there), which is all
// attention reads, and its floats, made when read, are those bf16 values. With TF32 products, the
// two layers.
TEST(Fast, ProjectedAttentionStoresQkvAsBf16) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const Index B = 2, T = 130, NH = 2, C = NH * 64, N = B * T;
  ASSERT_TRUE(fast_kernels::flashFits(B, C, NH));
  auto x = ok(h.build(N * C, Mixed{50})), w = ok(h.build(C * 3 * C, Mixed{51})), bias = ok(h.build(3 * C, Mixed{52}));
  const auto pair = ok(h.matmulAttentionForward(x, w, bias, B, T, C, NH));
  EXPECT_TRUE(pair.qkv.deferred());
  const osprey::Index before = h.deferredFloatsWritten();
  const auto qkv = read(pair.qkv);
  EXPECT_EQ(h.deferredFloatsWritten(), before + 1);
  for (Scalar v : qkv) ASSERT_TRUE(isBf16Value(v)) << v;
  const double gap = relativeGap(qkv, read(ok(reference::matmulForward(h, x, w, bias, N, C, 3 * C))));
  EXPECT_LT(gap, kStoredBf16Gap);
  report("attention input qkv (bf16 storage) vs reference", gap, kStoredBf16Gap);
  // Attention reads the same bf16 values whichever way qkv came.
  EXPECT_SAME_BITS(read(pair.attn.out), read(ok(h.attentionForward(pair.qkv, B, T, C, NH)).out));
  h.setProducts(FastHandler::Products::Tf32);
  const auto tf32 = ok(h.matmulAttentionForward(x, w, bias, B, T, C, NH));
  const auto tf32Qkv = ok(h.matmulForward(x, w, bias, N, C, 3 * C));
  EXPECT_FALSE(tf32.qkv.deferred());
  EXPECT_SAME_BITS(read(tf32.qkv), read(tf32Qkv));
  EXPECT_SAME_BITS(read(tf32.attn.out), read(ok(h.attentionForward(tf32Qkv, B, T, C, NH)).out));
}

// The fc layer and GELU with bf16 products: fc is stored as bf16 as qkv is, and GELU, both ways,
// reads those bf16 values: the same results, bit for bit, as from a float buffer holding them. In
// the backward pair the fc projection's dx is stored as bf16 (its float sums rounded once), which
// GELU's backward reads so.
TEST(Fast, ProjectedGeluReadsFcAsBf16) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const Index N = 37, IC = 64, OC = 3 * 1024 + 4;
  auto x = ok(h.build(N * IC, Mixed{53})), w = ok(h.build(IC * OC, Mixed{54})), bias = ok(h.build(OC, Mixed{55}));
  auto dout = ok(h.build(N * OC, Mixed{56}));
  const auto pair = ok(h.matmulGeluForward(x, w, bias, N, IC, OC));
  EXPECT_TRUE(pair.fc.deferred());
  EXPECT_TRUE(pair.gelu.deferred());
  const auto dfc = ok(h.geluBackward(dout, pair.fc));
  EXPECT_TRUE(pair.fc.deferred());  // GELU read the bf16 values, not the floats
  const auto fc = read(pair.fc);
  for (Scalar v : fc) ASSERT_TRUE(isBf16Value(v)) << v;
  const double fcGap = relativeGap(fc, read(ok(reference::matmulForward(h, x, w, bias, N, IC, OC))));
  EXPECT_LT(fcGap, kStoredBf16Gap);
  report("fc (bf16 storage) vs reference", fcGap, kStoredBf16Gap);
  auto floats = ok(h.fromList(std::span<const Scalar>(fc)));  // the same values as floats
  EXPECT_SAME_BITS(read(pair.gelu), read(ok(h.geluForward(floats))));
  EXPECT_SAME_BITS(read(dfc), read(ok(h.geluBackward(dout, floats))));
  // The backward pair: the projection's dx stored as bf16 too, which GELU's backward reads so.
  const Index C = 48;
  auto dy = ok(h.build(N * C, Mixed{57})), wp = ok(h.build(OC * C, Mixed{58}));
  const auto back = ok(h.geluMatmulBackward(dy, pair.gelu, wp, pair.fc, N, OC, C));
  const auto m = ok(h.matmulBackward(dy, pair.gelu, wp, N, OC, C));
  // Against GELU's backward from the float dx: dx's bf16 rounding, within 2^-8 of each element,
  // and its sums perhaps in another order (another algorithm for a bf16 output), a few 2^-24 of C
  // terms; a fraction of the largest value.
  const auto want = read(ok(h.geluBackward(m.dx, floats)));
  const double dfGap = relativeGap(read(back.df), want);
  EXPECT_LT(dfGap, std::ldexp(1.0, -8));
  report("gelu backward from a bf16-stored dx vs from the floats", dfGap, std::ldexp(1.0, -8));
  EXPECT_SAME_BITS(read(back.dw), read(m.dw));
  EXPECT_SAME_BITS(read(back.dbias), read(m.dbias));
}

// A linear layer's bias gradient is the column sums of its dout. Where dout comes from a LayerNorm
// backward (the residual stream's gradient), from flash attention's backward (dqkv) or from GELU's
// backward inside geluMatmulBackward, the kernels that wrote it summed its columns as they went,
// and matmulBackward takes those sums (biasSumsTaken counts it): float sums of dout's float
// values, within a float sum's roundings of the float64 sums of the values read back. Where
// GELU's rows do not fit that kernel (a width not a multiple of 8, or wider than its groups) and
// where dout has no such producer, a product of ones and dout's floats sums them.
//
// The producers add a column in partial sums of a few rows each and then the partials in a fixed
// order: a few dozen float roundings (2^-24 each) of running sums the size of a column's norm
// ‖dout[·][c]‖ (what a sum of terms of varying sign comes to), the errors of varying sign too.
// Every column's gap is bounded by 1e-6 (about 17·2^-24) of the largest column's norm; the largest
// column sum is of the order of that norm, so a halved or missing sum fails the bound by far.
constexpr double kColumnSumGap = 1e-6;
// The same sums by a product (cuBLAS's float sums, in an order it chooses): one after another, the
// worst order in practice, N = 3000 terms of these columns come to about 2e-6 of the largest sum.
// The bound is 1e-5 of the largest sum.
constexpr double kProductSumGap = 1e-5;

TEST(Fast, BiasGradientsFromTheirProducers) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  Gaps gaps;
  const auto columnCheck = [&](const std::vector<Scalar>& dout, const std::vector<Scalar>& dbias, Index N, Index OC,
                               const std::string& what) {
    ASSERT_EQ(dbias.size(), static_cast<std::size_t>(OC));
    std::vector<Scalar> sums(static_cast<std::size_t>(OC), 0.0);
    double scale = 0.0;  // the largest column's norm
    for (Index c = 0; c < OC; ++c) {
      double squares = 0.0;
      for (Index n = 0; n < N; ++n) sums[c] += dout[n * OC + c], squares += dout[n * OC + c] * dout[n * OC + c];
      scale = std::max(scale, std::sqrt(squares));
    }
    double worst = 0.0;
    for (Index c = 0; c < OC; ++c) {
      const double gap = std::abs(dbias[c] - sums[c]);
      EXPECT_LE(gap, kColumnSumGap * scale) << what << " column " << c;
      worst = std::max(worst, gap);
    }
    report((what + ", |Δ| / the largest column's norm").c_str(), worst / std::max(scale, 1e-30), kColumnSumGap);
  };
  for (const ProductsCase& c : kProductsCases) {
    SCOPED_TRACE(c.name);
    h.setProducts(c.products);
    const bool bf16 = c.products == FastHandler::Products::Bf16;
    // dbias summed by a product of ones and dout's floats instead, with either kind of product.
    const double productSums = kProductSumGap;
    const Index N = 3000, C = 48, IC = 40;
    auto x = ok(h.build(N * C, Mixed{61})), lw = ok(h.build(C, Mixed{62})), lb = ok(h.build(C, Mixed{63}));
    auto dout = ok(h.build(N * C, Mixed{64})), dresid = ok(h.build(N * C, Mixed{65}));
    auto in = ok(h.build(N * IC, Mixed{66})), w = ok(h.build(IC * C, Mixed{67}));
    const auto ln = ok(h.layernormForward(x, lw, lb, N, C));
    for (bool residual : {false, true}) {
      SCOPED_TRACE(residual ? "residual layernorm backward" : "layernorm backward");
      const auto g = residual ? ok(h.residualLayernormBackward(dresid, dout, x, lw, ln.mean, ln.rstd, N, C))
                              : ok(h.layernormBackward(dout, x, lw, ln.mean, ln.rstd, N, C));
      const Index taken = h.biasSumsTaken();
      const auto m = ok(h.matmulBackward(g.dx, in, w, N, IC, C));
      EXPECT_EQ(h.biasSumsTaken(), taken + 1);
      const std::string producer = residual ? "the residual layernorm backward" : "the layernorm backward";
      columnCheck(read(g.dx), read(m.dbias), N, C, fmt::format("{} products: dbias from {}'s sums", c.name, producer));
      // The same values in a buffer of their own: summed by the product, the same gradient within
      // the product's sums' bound.
      auto copy = ok(h.fromList(std::span<const Scalar>(read(g.dx))));
      const auto mc = ok(h.matmulBackward(copy, in, w, N, IC, C));
      EXPECT_EQ(h.biasSumsTaken(), taken + 1);
      EXPECT_SAME_BITS(read(mc.dw), read(m.dw));
      gaps.check(fmt::format("{} products: dbias summed by the product vs from {}'s sums", c.name, producer),
                 relativeGap(read(mc.dbias), read(m.dbias)), productSums);
    }
    {  // Flash attention's backward (head size 64): dqkv's column sums are the qkv layer's dbias.
      // T = 130: a last group of 16 rows with two rows in it, and a last tile with two.
      const Index B = 2, T = 130, NH = 2, Ca = 64 * NH, Na = B * T;
      auto qkv = ok(h.build(Na * 3 * Ca, Mixed{72})), dy = ok(h.build(Na * Ca, Mixed{73}));
      auto xa = ok(h.build(Na * IC, Mixed{74})), wa = ok(h.build(IC * 3 * Ca, Mixed{75}));
      const auto fwd = ok(h.attentionForward(qkv, B, T, Ca, NH));
      const auto dqkv = ok(h.attentionBackward(dy, qkv, fwd.att, B, T, Ca, NH));
      const Index taken = h.biasSumsTaken();
      const auto m = ok(h.matmulBackward(dqkv, xa, wa, Na, IC, 3 * Ca));
      EXPECT_EQ(h.biasSumsTaken(), taken + 1);
      columnCheck(read(dqkv), read(m.dbias), Na, 3 * Ca,
                  fmt::format("{} products: dbias from flash attention's backward's sums", c.name));
    }
    // GELU's backward inside geluMatmulBackward: df's column sums are the fc layer's dbias.
    // 36: not a multiple of 8, and 7176: wider than 7 groups of 8 a thread, so no sums; 5120 and
    // 6400 (774M's and 1558M's 4C): 5 and 7 groups a thread.
    for (Index F : {200, 5120, 6400, 36, 7176}) {
      SCOPED_TRACE(::testing::Message() << "fc width " << F);
      auto f = ok(h.build(N * F, Mixed{68})), gl = ok(h.build(N * F, Mixed{69})), wp = ok(h.build(F * C, Mixed{70}));
      auto wf = ok(h.build(IC * F, Mixed{71}));
      const auto back = ok(h.geluMatmulBackward(dout, gl, wp, f, N, F, C));
      const Index taken = h.biasSumsTaken();
      const auto fc = ok(h.matmulBackward(back.df, in, wf, N, IC, F));
      // (TF32 products: dx and f as floats, at most 5 groups a thread, so 6400 has no sums either.)
      const bool summed = fast_shapes::geluSumsWidthFits(F, !bf16);
      EXPECT_EQ(summed, F % 8 == 0 && F <= (bf16 ? 7168 : 5120));
      EXPECT_EQ(h.biasSumsTaken(), taken + (summed ? 1 : 0));
      const auto df = read(back.df);
      if (summed)
        columnCheck(df, read(fc.dbias), N, F, fmt::format("{} products: dbias from gelu backward's sums", c.name));
      else
        gaps.check(fmt::format("{} products: dbias summed by the product, fc width {}, vs reference", c.name, F),
                   relativeGap(read(fc.dbias), read(ok(reference::matmulBackward(h, back.df, in, wf, N, IC, F)).dbias)),
                   productSums);
      // GELU's values are GeluBackwardBody's, with or without the sums: the same bits from the same
      // float dx (TF32 products); with bf16 products geluMatmulBackward's dx is stored as bf16, so
      // against the float dx's within its rounding (2^-8, as in ProjectedGeluReadsFcAsBf16).
      const auto want = read(ok(h.geluBackward(ok(h.matmulBackward(dout, gl, wp, N, F, C)).dx, f)));
      if (bf16)
        gaps.check(fmt::format("gelu backward from a bf16-stored dx vs from the floats, fc width {}", F),
                   relativeGap(df, want), std::ldexp(1.0, -8));
      else
        EXPECT_SAME_BITS(df, want);
    }
  }
}

// A linear layer's bf16 twin is its buffer's own: a buffer made later at the same address (the
// device reuses released blocks), or another part of the same block, is read afresh; and the
// twin of a buffer read twice is made once.
TEST(Fast, Bf16TwinsFollowTheirBuffers) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const Index N = 8, IC = 64, OC = 32;
  auto w = ok(h.build(IC * OC, Mixed{31})), bias = ok(h.build(OC, Mixed{32}));
  // bf16 products against the reference's TF32 products: each kind's linear-layer bound. A twin of
  // another buffer's values would be as far off as the output is large.
  const double bound = kProductsCases[0].linearGap + kProductsCases[1].linearGap;
  Gaps gaps;
  const auto layer = [&](const FastHandler::Buffer& x) {
    const auto got = read(ok(h.matmulForward(x, w, bias, N, IC, OC)));
    gaps.check("bf16 linear layer vs reference, through each buffer's twin",
               relativeGap(got, read(ok(reference::matmulForward(h, x, w, bias, N, IC, OC)))), bound);
    return got;
  };
  const float* first = nullptr;
  std::vector<Scalar> before;
  {
    auto x = ok(h.build(N * IC, Mixed{33}));
    first = x.data();
    before = layer(x);
    EXPECT_TRUE(osprey::testing::sameBits(layer(x), before)) << "a buffer read twice gave two answers";
  }
  auto again = ok(h.build(N * IC, Mixed{34}));
  std::printf("[ measured ] the second buffer %s the first one's address\n",
              again.data() == first ? "reuses" : "does not reuse");
  EXPECT_NE(layer(again), before);
  auto block = ok(h.build(2 * N * IC, Mixed{35}));
  const auto low = block.part(0, N * IC), high = block.part(N * IC, N * IC);
  EXPECT_NE(layer(low), layer(high));
}

// The lm head and the loss as one pair: for the lm head's V (not a multiple of 4) the logits and
// probabilities stay in rows padded to a multiple of 4. The forward's padded product and float
// cross-entropy are the ones the layers run one by one on this handler, so the losses are theirs bit
// for bit. The backward reads the probabilities as they are and takes the targets' one-hot share
// off after the products (dlogits is never formed): against the exact handler it stays within the
// bound of float kernels plus TF32 products, like the layers one by one; it refuses probabilities
// in another layout.
struct TargetIds {
  Index V;
  OSPREY_FN Scalar operator()(Index n) const { return static_cast<Scalar>((n * 37 + 5) % V); }
};

// Decoding's attention (one query against the cache, the online softmax in one pass) against its
// reference on fast: head sizes 64 (GPT-2's) and 48 (the general kernel), from one cached position
// to past the warps' two-at-a-time stride and to many rounds of the block, with flat and sharp
// softmax rows.
TEST(Fast, DecodeAttentionMatchesItsReference) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  double worst = 0.0;
  for (const auto [C, NH] : {std::pair<Index, Index>{128, 2}, std::pair<Index, Index>{96, 2}})
    for (Index Tc : {1, 2, 31, 33, 100, 129, 257, 1000})
      for (double sharpness : {1.0, 8.0}) {
        SCOPED_TRACE(::testing::Message() << "C " << C << " NH " << NH << " Tc " << Tc << " sharpness " << sharpness);
        auto qkv = ok(h.build(3 * C, ScaledMixed{41, sharpness}));
        auto keys = ok(h.build(Tc * C, Mixed{42})), values = ok(h.build(Tc * C, Mixed{43}));
        const double gap = relativeGap(read(ok(h.attentionDecode(qkv, keys, values, Tc, C, NH))),
                                       read(ok(reference::attentionDecode(h, qkv, keys, values, Tc, C, NH))));
        worst = std::max(worst, gap);
        EXPECT_LT(gap, kFusedFloatGap);
      }
  report("decode attention fused vs reference", worst, kFusedFloatGap);
  auto qkv = ok(h.build(3 * 600, Mixed{41})), cache = ok(h.build(600, Mixed{42}));
  auto wide = h.attentionDecode(qkv, cache, cache, 1, 600, 2);
  ASSERT_FALSE(wide.ok());
  // Refused before launching, naming the kernel and the shape (fast/shape_support.hpp).
  EXPECT_NE(wide.error().message.find("(kernel attendOneRow): heads of 300 channels; it takes heads up to 256 wide"),
            std::string::npos)
      << wide.error().message;
}

TEST(Fast, HeadLossKeepsPaddedRows) {
  auto h = makeFast();
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  for (const ProductsCase& c : kProductsCases) {
    h.setProducts(c.products);
    const bool halves = c.products == FastHandler::Products::Bf16;
    // Float kernels plus the products: 4 terms' worth of each kind's rounding (TF32: 4·2^-10).
    const double bound = 4.0 * std::ldexp(1.0, -c.termBits);
    double worst = 0.0;
    for (Index N : {8, 64, 130}) {
      SCOPED_TRACE(::testing::Message() << c.name << " N " << N);
      const Index C = 40, V = 1027, Vp = fast_detail::paddedWidth(V);
      const Scalar dloss = 1.0 / static_cast<Scalar>(N);
      auto z = ok(h.build(N * C, Mixed{41})), wte = ok(h.build(V * C, Mixed{42})), targets = ok(h.build(N, TargetIds{V}));
      auto zExact = ok(exact.build(N * C, Mixed{41})), wteExact = ok(exact.build(V * C, Mixed{42}));
      auto targetsExact = ok(exact.build(N, TargetIds{V}));
      const auto fused = ok(h.headLoss(z, wte, targets, N, C, V));
      const auto layers = ok(reference::headLoss(h, z, wte, targets, N, C, V));
      EXPECT_SAME_BITS(read(fused.losses), read(layers.losses));
      const bool padded = fast_detail::padsRows(N, V);
      EXPECT_EQ(fused.probs.size(), !padded ? N * V : halves ? (N * Vp + 1) / 2 : N * Vp);
      const auto want = ok(reference::headLoss(exact, zExact, wteExact, targetsExact, N, C, V));
      const auto gWant = ok(reference::headLossBackward(exact, want.probs, targetsExact, zExact, wteExact, N, C, V, dloss));
      const auto g = ok(h.headLossBackward(fused.probs, targets, z, wte, N, C, V, dloss));
      const auto gl = ok(reference::headLossBackward(h, layers.probs, targets, z, wte, N, C, V, dloss));
      const auto dzWant = osprey::testing::readAll(exact, gWant.dx), dwtWant = osprey::testing::readAll(exact, gWant.dwt);
      const double dzGap = relativeGap(read(g.dx), dzWant), dwtGap = relativeGap(read(g.dwt), dwtWant);
      EXPECT_LT(dzGap, bound);
      EXPECT_LT(dwtGap, bound);
      worst = std::max({worst, dzGap, dwtGap});
      std::printf("[ measured ] %s N %lld lm head backward vs exact: dz %.3g, dwte %.3g (layers one by one: %.3g, %.3g)\n",
                  c.name, static_cast<long long>(N), dzGap, dwtGap, relativeGap(read(gl.dx), dzWant),
                  relativeGap(read(gl.dwt), dwtWant));
      if (padded) {
        const auto refused = h.headLossBackward(layers.probs, targets, z, wte, N, C, V, dloss);
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.error().message.find(fmt::format("padded to {}{}", Vp, halves ? ", as bf16 pairs" : "")),
                  std::string::npos)
            << refused.error().message;
      }
    }
    report(fmt::format("lm head and loss backward vs exact ({} products)", c.name).c_str(), worst, bound);
  }
}

// The cross-entropy keeps each row's first groups of four in shared memory for its passes
// (fast_kernels::crossEntropyCache): the probabilities and losses are the bits of the same kernel
// reading every logit from memory on each pass, for rows the cache holds whole (the lm head's
// padded 50,304), rows it holds in part (70,000: 280 KB), and more rows than blocks (each block
// refills its cache).
TEST(Fast, CrossEntropyCacheChangesNoBit) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  int optIn = 0, multiprocessors = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&optIn, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  for (Index V : {50304, 70000}) {
    const Index N = 300;
    const int cached = fast_kernels::crossEntropyCache(static_cast<int>(V), static_cast<std::size_t>(optIn));
    SCOPED_TRACE(::testing::Message() << "V " << V << ", " << cached << " groups cached");
    if (V == 50304) EXPECT_EQ(cached, V / 4);  // an H100's or H200's 227 KB hold the lm head's row
    if (V == 70000) {
      EXPECT_GT(cached, 0);
      EXPECT_LT(cached, V / 4);
    }
    auto logits = ok(h.build(N * V, ScaledMixed{18, 12.0}));
    auto targets = ok(h.build(N, TargetIds{V}));
    const auto withCache = ok(h.crossEntropyForward(logits, targets, N, V));
    auto probs = ok(h.allocate(N * V)), losses = ok(h.allocate(N));
    const unsigned blocks = fast_kernels::crossEntropyBlocks(N, multiprocessors);
    fast_kernels::crossEntropyForward<<<blocks, fast_kernels::kLossThreads, 0, h.stream()>>>(
        probs.data(), losses.data(), logits.data(), targets.data(), N, static_cast<int>(V), static_cast<int>(V),
        nullptr, 0);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_SAME_BITS(read(withCache.losses), read(losses));
    EXPECT_SAME_BITS(read(withCache.probs), read(probs));
  }
}

// The LayerNorm kernels hold a row in registers where fast_kernels::withHeldGroups gives a lane
// enough groups (every GPT-2 width) and walk it otherwise, with the same sums in the same order:
// at the widths past 124M's, each held kernel's outputs are the bits of the same kernel given 6
// groups (too few: it walks the row). Forward: out, its twin, mean and rstd; backward (with the
// residual stream's gradient and the dx sums): dx, its twin and the blocks' partial column sums,
// with more rows than the grid's warps.
TEST(Fast, LayerNormHeldRowsChangeNoBit) {
  auto h = makeFast();
  using Halves = osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16>;
  for (int C : {1024, 1280, 1600}) {
    SCOPED_TRACE(::testing::Message() << "C " << C);
    const Index N = 611, n = N * C;
    const int blocks = 23, sets = 3;  // 184 warps for 611 rows
    auto x = ok(h.build(n, Mixed{41})), w = ok(h.build(C, Mixed{42})), b = ok(h.build(C, Mixed{43}));
    auto dout = ok(h.build(n, Mixed{44})), dresid = ok(h.build(n, Mixed{45}));
    const std::size_t shared = fast_shapes::layernormBackwardShared(C, sets);
    const auto run = [&](auto forward, auto backward) {
      std::vector<std::vector<unsigned char>> all;
      auto out = ok(h.allocate(n)), mean = ok(h.allocate(N)), rstd = ok(h.allocate(N));
      auto dx = ok(h.allocate(n)), partials = ok(h.allocate(Index{blocks} * sets * C));
      Halves twin(h.runtime(), ok(h.runtime()->allocate<__nv_bfloat16>(n)), n);
      Halves dxTwin(h.runtime(), ok(h.runtime()->allocate<__nv_bfloat16>(n)), n);
      forward<<<fast_kernels::rowBlocks(N), fast_kernels::kRowWarps * 32, 0, h.stream()>>>(
          out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, twin.data());
      EXPECT_EQ(cudaGetLastError(), cudaSuccess);
      EXPECT_EQ(cudaFuncSetAttribute(backward, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)),
                cudaSuccess);
      backward<<<blocks, fast_kernels::kRowWarps * 32, shared, h.stream()>>>(
          dx.data(), partials.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C, dresid.data(),
          dxTwin.data(), true);
      EXPECT_EQ(cudaGetLastError(), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(h.stream()), cudaSuccess);
      for (const auto* f : {&out, &mean, &rstd, &dx, &partials}) all.push_back(bitsOf(f->data(), f->size() * 4));
      all.push_back(bitsOf(twin.data(), n * 2));
      all.push_back(bitsOf(dxTwin.data(), n * 2));
      return all;
    };
    const auto held = fast_kernels::withHeldGroups(C, [&]<int Groups>(std::integral_constant<int, Groups>) {
      EXPECT_GT(Groups, fast_kernels::kHeldGroups);
      return run(fast_kernels::layerNormForward<Groups>, fast_kernels::layerNormBackward<Groups>);
    });
    constexpr int kWalked = fast_kernels::kHeldGroups;  // too few for these widths: the row is walked
    const auto walked = run(fast_kernels::layerNormForward<kWalked>, fast_kernels::layerNormBackward<kWalked>);
    const char* names[] = {"out", "mean", "rstd", "dx", "partial column sums", "out's twin", "dx's twin"};
    for (std::size_t i = 0; i < held.size(); ++i) EXPECT_TRUE(held[i] == walked[i]) << names[i];
  }
}

// adamwUpdates answers a list of tensors in a few launches (fast_kernels::adamwTensors, 24 tensors
// a launch): each tensor's update and twin are those of adamwUpdate on it alone, bit for bit, over
// more tensors than one launch takes, of sizes that fill many blocks, one, or less than a group.
TEST(Fast, AdamWOverTensorsIsEachTensorsUpdate) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  std::vector<FastHandler::Buffer> ps, gs, ms, vs;
  std::vector<bool> decay;
  const Index count = 2 * fast_kernels::kAdamWTensors + 5;
  for (Index k = 0; k < count; ++k) {
    const Index n = k % 5 == 0 ? 70001 + k : k % 5 == 1 ? 1 + k % 3 : 768 * (1 + k % 4);
    ps.push_back(ok(h.build(n, Mixed{100 + k})));
    gs.push_back(ok(h.build(n, Mixed{200 + k})));
    ms.push_back(ok(h.build(n, Mixed{300 + k})));
    auto v = ok(h.build(n, Wave{}));
    vs.push_back(ok(h.zipWith(v, v, ProductPlusOne{})));  // second moments are >= 0
    decay.push_back(k % 2 == 0);
  }
  const auto all = ok(h.adamwUpdates(ps, gs, ms, vs, 4, 1e-3, 0.9, 0.95, 1e-8, 0.1, decay));
  ASSERT_EQ(all.size(), ps.size());
  for (Index k = 0; k < count; ++k) {
    SCOPED_TRACE(::testing::Message() << "tensor " << k << " of " << ps[k].size());
    const auto one = ok(h.adamwUpdate(ps[k], gs[k], ms[k], vs[k], 4, 1e-3, 0.9, 0.95, 1e-8, 0.1, decay[k]));
    EXPECT_SAME_BITS(read(all[k].param), read(one.param));
    EXPECT_SAME_BITS(read(all[k].m), read(one.m));
    EXPECT_SAME_BITS(read(all[k].v), read(one.v));
    // The twins the next step's products read: one row's product over every element of each.
    const Index n = ps[k].size();
    auto x = ok(h.build(n, Mixed{36})), bias = ok(h.build(1, Mixed{37}));
    EXPECT_SAME_BITS(read(ok(h.matmulForward(x, all[k].param, bias, 1, n, 1))),
              read(ok(h.matmulForward(x, one.param, bias, 1, n, 1))));
  }
  EXPECT_FALSE(h.adamwUpdates(ps, gs, ms, vs, 0, 1e-3, 0.9, 0.95, 1e-8, 0.1, decay).ok());  // step 0
  ms.pop_back();
  const auto refused = h.adamwUpdates(ps, gs, ms, vs, 4, 1e-3, 0.9, 0.95, 1e-8, 0.1, decay);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("first and"), std::string::npos) << refused.error().message;
}

// The check of a step's new weights for NaN and infinities (train::anyNonFinite) in a few launches
// (fast_kernels::nonFiniteTensors), over more tensors than one launch takes, of sizes that fill many
// blocks, one element, or less than a group of four: one bad element anywhere (the first, the
// last, past the last group of four, in the second launch's tensors) is found, as the reference
// definition finds it, and the largest floats are not bad.
TEST(Fast, NonFiniteCheckFindsOneBadElementInAnyTensor) {
  auto h = makeFast();
  const Index count = fast_kernels::kNonFiniteTensors + 7;
  const Scalar top = std::numeric_limits<float>::max();
  const auto filled = [&](Index n, Index at, Scalar bad) {
    std::vector<Scalar> values(static_cast<std::size_t>(n), n % 2 ? top : -top);
    if (at >= 0) values[static_cast<std::size_t>(at)] = bad;
    return ok(h.fromList(std::span<const Scalar>(values)));
  };
  std::vector<FastHandler::Buffer> clean;
  for (Index k = 0; k < count; ++k)
    clean.push_back(filled(k % 4 == 0 ? 70001 + k : k % 4 == 1 ? 1 + k % 3 : 768 * (1 + k % 3) + k % 4, -1, 0.0));
  EXPECT_FALSE(ok(h.anyNonFinite(clean)));
  EXPECT_FALSE(ok(gpt2::train::reference::anyNonFinite(h, clean)));
  for (Scalar bad : {std::numeric_limits<Scalar>::quiet_NaN(), std::numeric_limits<Scalar>::infinity(),
                     -std::numeric_limits<Scalar>::infinity()})
    for (Index k : {Index{0}, Index{1}, Index{2}, Index{3}, Index{fast_kernels::kNonFiniteTensors}, count - 1}) {
      const Index n = clean[static_cast<std::size_t>(k)].size();
      for (Index at : {Index{0}, n / 2, 4 * (n / 4), n - 1}) {
        if (at >= n) continue;
        SCOPED_TRACE(::testing::Message() << bad << " in tensor " << k << " of " << n << " at " << at);
        auto tensors = clean;
        tensors[static_cast<std::size_t>(k)] = filled(n, at, bad);
        EXPECT_TRUE(ok(h.anyNonFinite(tensors)));
        EXPECT_TRUE(ok(gpt2::train::reference::anyNonFinite(h, tensors)));
      }
    }
}

// The embedding backward: each token's rows found by a sort, then summed in float in segments of
// rows. Tokens repeat (some ids many times, some never; at B = 70 one id fills three segments of
// fast_kernels::kTokenSegment rows), positions start past 0, and a base (the lm head's share) is
// added or not; a token outside [0, V) is refused.
struct RepeatingTokens {
  Index V;
  OSPREY_FN Scalar operator()(Index n) const { return static_cast<Scalar>((n * n * 7 + 3) % 11 == 0 ? V - 1 : (n * 13) % (V / 2)); }
};

TEST(Fast, EncoderBackwardMatchesItsReference) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const Index V = 37, maxT = 9;
  // V - 1 holds the rows where (7n² + 3) mod 11 = 0, 2 of every 11: 76 of B = 70's 420, past two segments.
  static_assert(2 * fast_kernels::kTokenSegment < 420 * 2 / 11);
  Gaps gaps;
  for (Index C : {1, 31, 64}) {
    for (Index B : {3, 70})
      for (Index posOffset : {0, 2}) {
        SCOPED_TRACE(::testing::Message() << "C " << C << " B " << B << " posOffset " << posOffset);
        const Index T = 6, N = B * T;
        auto tokens = ok(h.build(N, RepeatingTokens{V})), dout = ok(h.build(N * C, Mixed{31}));
        auto base = ok(h.build(V * C, Mixed{32}));
        const auto alone = ok(h.encoderBackward(dout, tokens, N, T, C, V, maxT, posOffset));
        const auto aloneRef = ok(reference::encoderBackward(h, dout, tokens, nullptr, N, T, C, V, maxT, posOffset));
        gaps.check("encoder backward dwte fused vs reference", relativeGap(read(alone.dwte), read(aloneRef.dwte)),
                   kFusedFloatGap);
        gaps.check("encoder backward dwpe fused vs reference", relativeGap(read(alone.dwpe), read(aloneRef.dwpe)),
                   kFusedFloatGap);
        const auto onto = ok(h.encoderBackwardOnto(base, dout, tokens, N, T, C, V, maxT, posOffset));
        const auto ontoRef = ok(reference::encoderBackward(h, dout, tokens, &base, N, T, C, V, maxT, posOffset));
        gaps.check("encoder backward dwte onto a base fused vs reference",
                   relativeGap(read(onto.dwte), read(ontoRef.dwte)), kFusedFloatGap);
        EXPECT_SAME_BITS(read(onto.dwpe), read(alone.dwpe));
      }
  }
  const Index N = 4, T = 2, C = 3;
  auto bad = ok(h.build(N, RepeatingTokens{V + 5}));  // ids up to V + 4
  auto dout = ok(h.build(N * C, Mixed{33}));
  const auto refused = h.encoderBackward(dout, bad, N, T, C, V, maxT, 0);
  auto message = refused.ok() ? std::string() : refused.error().message;
  if (refused.ok()) {  // a deferred fault surfaces at the next read-back
    auto flushed = h.runtime()->flush();
    ASSERT_FALSE(flushed.ok());
    message = flushed.error().message;
  }
  EXPECT_NE(message.find("index out of range"), std::string::npos) << message;
  EXPECT_FALSE(h.encoderBackward(dout, bad, N, 3, C, V, maxT, 0).ok());  // 4 rows are not sequences of 3
}

// Flash attention (head size 64), with each kind of operand: against the reference definition on
// the exact handler, beside the unfused TF32 path it replaces (the reference on this handler), at
// lengths around the 64-position tiles, with flat and with sharp softmax rows (the online
// softmax's rescaling matters when a later tile holds a larger score). The inputs are multiples of
// 2^-(bits - 1) below 1 in magnitude (times a power of 2), which the kind holds exactly (11
// significant bits for TF32, 8 for bf16): what is left is the rounding of p and ds to the kind
// (2^-11 or 2^-8 relative) and float arithmetic, 4 such roundings at most. Its backward reads the
// state its forward kept, gives the same bits every run, and refuses a state of another length.
struct ExactValues {
  Index salt;
  Scalar scale;
  int bits;  // significant bits of the values
  OSPREY_FN Scalar operator()(Index i) const {
    const Index steps = (Index{1} << bits) - 1, half = Index{1} << (bits - 1);
    return scale * (static_cast<Scalar>((i * 7919 + salt * 104729) % steps) / static_cast<Scalar>(half) - 1.0);
  }
};

// Section `section` (0 q, 1 k, 2 v) of a (rows, 3C) tensor.
std::vector<Scalar> sectionOf(const std::vector<Scalar>& v, Index C, Index section) {
  std::vector<Scalar> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    if ((static_cast<Index>(i) % (3 * C)) / C == section) out.push_back(v[i]);
  return out;
}

TEST(Fast, FlashAttentionMatchesItsReference) {
  auto h = makeFast();
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const Index B = 2, NH = 3, C = NH * 64;
  ASSERT_TRUE(fast_kernels::flashFits(B, C, NH));
  for (const ProductsCase& c : kProductsCases) {
    h.setProducts(c.products);
    const int bits = c.termBits + 1;  // significant bits the kind holds
    double worst = 0.0;
    for (Index T : {1, 5, 64, 65, 130, 257}) {
      for (Scalar sharpness : {1.0, 4.0}) {
        SCOPED_TRACE(::testing::Message() << c.name << " T " << T << " sharpness " << sharpness);
        const ExactValues qkvValues{23, sharpness, bits}, doutValues{24, 1.0, bits};
        auto qkv = ok(h.build(B * T * 3 * C, qkvValues)), dout = ok(h.build(B * T * C, doutValues));
        auto qkvExact = ok(exact.build(B * T * 3 * C, qkvValues)), doutExact = ok(exact.build(B * T * C, doutValues));
        const auto fused = ok(h.attentionForward(qkv, B, T, C, NH));
        EXPECT_EQ(fused.att.size(), B * NH * T + B * T * C);  // log-sum-exp and out, no (T, T) table
        const auto unfused = ok(reference::attentionForward(h, qkv, B, T, C, NH));
        const auto want = ok(reference::attentionForward(exact, qkvExact, B, T, C, NH));
        const auto wantOut = osprey::testing::readAll(exact, want.out);
        const double outGap = relativeGap(read(fused.out), wantOut);
        EXPECT_LT(outGap, c.flashGap);
        worst = std::max(worst, outGap);
        std::printf("[ measured ] %s T %lld sharpness %g out: flash %.3g, unfused %.3g\n", c.name,
                    static_cast<long long>(T), sharpness, outGap, relativeGap(read(unfused.out), wantOut));
        const auto dqkv = read(ok(h.attentionBackward(dout, qkv, fused.att, B, T, C, NH)));
        const auto dqkvUnfused = read(ok(reference::attentionBackward(h, dout, qkv, unfused.att, B, T, C, NH)));
        const auto dqkvWant = osprey::testing::readAll(exact, ok(reference::attentionBackward(exact, doutExact, qkvExact,
                                                                                              want.att, B, T, C, NH)));
        for (Index section = 0; section < 3; ++section) {
          const auto w = sectionOf(dqkvWant, C, section);
          // At T = 1 the one softmax row is constant, so dq = dk = 0: there, against dqkv's scale.
          const double scale = largestAbs(w) > 0.0 ? largestAbs(w) : largestAbs(dqkvWant);
          // Each of dq, dk, dv against its own scale, so a section left unwritten cannot hide in another's.
          const double gap = largestGap(sectionOf(dqkv, C, section), w) / scale;
          EXPECT_LT(gap, c.flashGap) << "d" << "qkv"[section];
          worst = std::max(worst, gap);
          std::printf("[ measured ]   d%c: flash %.3g, unfused %.3g\n", "qkv"[section], gap,
                      largestGap(sectionOf(dqkvUnfused, C, section), w) / scale);
        }
        EXPECT_SAME_BITS(read(ok(h.attentionBackward(dout, qkv, fused.att, B, T, C, NH))), dqkv);
        const auto foreign = h.attentionBackward(dout, qkv, unfused.att, B, T, C, NH);
        if (T != 65) {  // at T = 65 the probabilities have the flash state's length
          ASSERT_FALSE(foreign.ok());
          EXPECT_NE(foreign.error().message.find("log-sum-exp"), std::string::npos) << foreign.error().message;
        }
      }
    }
    report(fmt::format("flash attention vs exact, out and each of dq, dk, dv ({} tiles)", c.name).c_str(), worst,
           c.flashGap);
  }
}

// Flash attention where B·NH·T is odd: GPT-2 1558M's 25 heads at B1 over odd lengths (a 5-token
// prompt). The saved state's output must stay aligned (fast_shapes::flashSaved: it once lay behind
// the B·NH·T log-sum-exps, 500 bytes in at T 5, and the forward's 8-byte stores faulted); out and
// each of dq, dk, dv within the kind's bound of exact, and the projection after attention reads
// out's floats (TF32) or its twin (bf16) as it reads a copy of them.
TEST(Fast, FlashAttentionAtAnOddCountOfRows) {
  auto h = makeFast();
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const Index B = 1, NH = kGpt2_1558M.NH, C = kGpt2_1558M.C;
  ASSERT_TRUE(fast_kernels::flashFits(B, C, NH));
  Gaps gaps;
  for (const ProductsCase& c : kProductsCases) {
    h.setProducts(c.products);
    const int bits = c.termBits + 1;
    const std::string what = fmt::format("flash attention at 25 heads vs exact, out and each of dq, dk, dv ({} tiles)",
                                         c.name);
    for (Index T : {1, 5, 7, 67}) {
      SCOPED_TRACE(::testing::Message() << c.name << " T " << T);
      const ExactValues qkvValues{25, 1.0, bits}, doutValues{26, 1.0, bits};
      auto qkv = ok(h.build(B * T * 3 * C, qkvValues)), dout = ok(h.build(B * T * C, doutValues));
      auto qkvExact = ok(exact.build(B * T * 3 * C, qkvValues)), doutExact = ok(exact.build(B * T * C, doutValues));
      const auto fused = ok(h.attentionForward(qkv, B, T, C, NH));
      EXPECT_EQ(fused.att.size(), B * NH * T + B * T * C);
      const auto want = ok(reference::attentionForward(exact, qkvExact, B, T, C, NH));
      gaps.check(what, relativeGap(read(fused.out), osprey::testing::readAll(exact, want.out)), c.flashGap);
      const auto w = ok(h.build(C * C, Mixed{38})), bias = ok(h.build(C, Mixed{39}));
      const auto copy = ok(h.fromList(std::span<const Scalar>(read(fused.out))));
      EXPECT_SAME_BITS(read(ok(h.matmulForward(fused.out, w, bias, B * T, C, C))),
                       read(ok(h.matmulForward(copy, w, bias, B * T, C, C))));
      const auto dqkv = read(ok(h.attentionBackward(dout, qkv, fused.att, B, T, C, NH)));
      const auto dqkvWant = osprey::testing::readAll(
          exact, ok(reference::attentionBackward(exact, doutExact, qkvExact, want.att, B, T, C, NH)));
      for (Index section = 0; section < 3; ++section) {
        const auto expected = sectionOf(dqkvWant, C, section);
        const double scale = largestAbs(expected) > 0.0 ? largestAbs(expected) : largestAbs(dqkvWant);
        SCOPED_TRACE(::testing::Message() << "d" << "qkv"[section]);
        gaps.check(what, largestGap(sectionOf(dqkv, C, section), expected) / scale, c.flashGap);
      }
    }
  }
}

// The flash kernels with bf16 tiles two ways: mma.sync (flashForward<Bf16Tiles>, flashBackwardKeys,
// which a build without sm_90a runs) and warpgroup products (flashForwardWgmma,
// flashBackwardKeysWgmma: the handler's choice on an H100 or H200), on the same tiles. The same
// bits, out and the log-sum-exps of the forward and dq, dk, dv of the backward (each sum over the
// same tiles in the same order, each product's k-steps in order); out within the bf16 bound of the
// exact reference (the handler's test above checks the backward's); the same bits every run.
// Lengths around the 64-position tiles.
TEST(Fast, FlashKernelsAgree) {
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), cudaSuccess);
#if defined(OSPREY_CUDA_WGMMA)
  if (major == 9 && minor == 0) ASSERT_TRUE(fast_kernels::wgmmaReady());  // an H100/H200 never falls back
#endif
  if (!fast_kernels::wgmmaReady()) GTEST_SKIP() << "no sm_90a code for this device: the mma.sync kernels alone run";
  auto h = makeFast();
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  const ProductsCase& bf16 = kProductsCases[0];
  ASSERT_EQ(bf16.products, FastHandler::Products::Bf16);
  const Index B = 2, NH = 3, C = NH * 64;
  constexpr Index longest = 1024;
  const auto deviceArray = [](auto*& p, std::size_t n) { return cudaMalloc(&p, sizeof(*p) * n); };
  __nv_bfloat16 *qkvTwin = nullptr, *doutTwin = nullptr;
  std::uint32_t* dsT = nullptr;
  ASSERT_EQ(deviceArray(qkvTwin, B * longest * 3 * C), cudaSuccess);
  const std::unique_ptr<__nv_bfloat16, cudaError_t (*)(void*)> heldQkvTwin(qkvTwin, cudaFree);
  ASSERT_EQ(deviceArray(doutTwin, B * longest * C), cudaSuccess);
  const std::unique_ptr<__nv_bfloat16, cudaError_t (*)(void*)> heldDoutTwin(doutTwin, cudaFree);
  ASSERT_EQ(deviceArray(dsT, fast_kernels::flashDsWords(B, longest, NH)), cudaSuccess);
  const std::unique_ptr<std::uint32_t, cudaError_t (*)(void*)> heldDs(dsT, cudaFree);
  const char* kKernels[2] = {"mma.sync", "warpgroup"};
  double worst = 0.0;
  for (Index T : {Index{1}, Index{5}, Index{64}, Index{65}, Index{128}, Index{130}, Index{257}, longest}) {
    for (Scalar sharpness : {1.0, 4.0}) {
      SCOPED_TRACE(::testing::Message() << "T " << T << " sharpness " << sharpness);
      const ExactValues qkvValues{23, sharpness, bf16.termBits + 1}, doutValues{24, 1.0, bf16.termBits + 1};
      auto qkv = ok(h.build(B * T * 3 * C, qkvValues)), dout = ok(h.build(B * T * C, doutValues));
      fast_kernels::bf16Copy<<<64, fast_kernels::kTwinThreads, 0, h.stream()>>>(qkvTwin, qkv.data(), qkv.size(),
                                                                                qkv.size());
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      const fast_kernels::TileSource qkvTiles{qkv.data(), qkvTwin}, doutTiles{dout.data(), doutTwin};
      const auto want = osprey::testing::readAll(
          exact, ok(reference::attentionForward(exact, ok(exact.build(B * T * 3 * C, qkvValues)), B, T, C, NH)).out);
      std::vector<Scalar> outs[2], lses[2], dqkvs[2];
      for (int kernel = 0; kernel < 2; ++kernel) {
        SCOPED_TRACE(kKernels[kernel]);
        for (int run = 0; run < 2; ++run) {
          auto out = ok(h.allocate(B * T * C)), lse = ok(h.allocate(B * NH * T)), rowDot = ok(h.allocate(B * NH * T));
          auto dqkv = ok(h.allocate(B * T * 3 * C));
          ASSERT_TRUE((kernel == 0 ? fast_kernels::flashAttentionForward<fast_kernels::Bf16Tiles>(
                                         h.stream(), qkvTiles, {out.data()}, lse.data(), B, T, C, NH)
                                   : fast_kernels::flashAttentionForwardWgmma(h.stream(), qkvTiles, {out.data()},
                                                                              lse.data(), B, T, C, NH))
                          .ok());
          ASSERT_TRUE(fast_kernels::flashRowDotsOf(h.stream(), dout.data(), out.data(), rowDot.data(), doutTwin, B, T,
                                                   C, NH)
                          .ok());
          ASSERT_TRUE((kernel == 0 ? fast_kernels::flashAttentionBackward<fast_kernels::Bf16Tiles>(
                                         h.stream(), doutTiles, qkvTiles, lse.data(), rowDot.data(), {dqkv.data()}, B,
                                         T, C, NH, dsT)
                                   : fast_kernels::flashAttentionBackwardWgmma(h.stream(), doutTiles, qkvTiles,
                                                                               lse.data(), rowDot.data(),
                                                                               {dqkv.data()}, B, T, C, NH, dsT))
                          .ok());
          if (run == 1) {
            EXPECT_SAME_BITS(read(out), outs[kernel]);  // out, a second run
            EXPECT_SAME_BITS(read(dqkv), dqkvs[kernel]);  // dqkv, a second run
            continue;
          }
          outs[kernel] = read(out);
          lses[kernel] = read(lse);
          dqkvs[kernel] = read(dqkv);
        }
        const double gap = relativeGap(outs[kernel], want);
        EXPECT_LT(gap, bf16.flashGap);
        worst = std::max(worst, gap);
      }
      EXPECT_SAME_BITS(outs[1], outs[0]);
      EXPECT_SAME_BITS(lses[1], lses[0]);
      EXPECT_SAME_BITS(dqkvs[1], dqkvs[0]);
      std::printf("[ measured ] T %lld sharpness %g out: mma.sync %.3g, warpgroup %.3g; largest gap between them: "
                  "out %.3g, lse %.3g, dqkv %.3g\n",
                  static_cast<long long>(T), sharpness, relativeGap(outs[0], want), relativeGap(outs[1], want),
                  largestGap(outs[0], outs[1]), largestGap(lses[0], lses[1]), largestGap(dqkvs[0], dqkvs[1]));
    }
  }
  report("flash forward kernels vs exact, out (bf16 tiles)", worst, bf16.flashGap);
}

TEST(Fast, TinyLogitsWithinTolerance) {
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  const auto want = fullLogits(exact, tinyOn(exact), kPrompt);
  for (const ProductsCase& c : kProductsCases) {
    SCOPED_TRACE(c.name);
    auto fast = makeFast();
    fast.setProducts(c.products);
    const auto got = fullLogits(fast, tinyOn(fast), kPrompt);
    ASSERT_EQ(got.size(), want.size());
    for (Scalar x : got) ASSERT_TRUE(std::isfinite(x));
    const double gap = largestGap(got, want) / largestAbs(want);
    report(fmt::format("tiny logits max|Δ| / max|logit| ({} products)", c.name).c_str(), gap, c.logitGap);
    EXPECT_GT(gap, 0.0) << "fast gave the exact doubles: it is not the fast arithmetic";
    EXPECT_LT(gap, c.logitGap);
  }
}

// The logits of kPrompt's last token by a cached step: the prompt before it through prefill, then
// one decodeStep.
template <class H>
std::vector<Scalar> cachedStepLogits(H& h, const ForwardWeights<H>& w) {
  const std::vector<int> prompt(kPrompt.begin(), kPrompt.end() - 1);
  const int one[1] = {kPrompt.back()};
  auto first = ok(prefill(h, w, tokensOn(h, prompt), static_cast<Index>(prompt.size())));
  auto next = ok(decodeStep(h, w, first.cache, tokensOn(h, std::span<const int>(one))));
  return osprey::testing::readAll(h, next.logits);
}

// The cached step on fast stays as near the full pass as fast is to exact (its one-row products
// read the float weights; the full pass's products are of either kind).
TEST(Fast, CachedStepNearFullPass) {
  for (const ProductsCase& c : kProductsCases) {
    SCOPED_TRACE(c.name);
    auto h = makeFast();
    h.setProducts(c.products);
    const auto w = tinyOn(h);
    const auto cached = cachedStepLogits(h, w);
    const auto full = fullLogits(h, w, kPrompt);
    const std::vector<Scalar> lastRow(full.end() - static_cast<std::ptrdiff_t>(cached.size()), full.end());
    const double gap = largestGap(cached, lastRow) / largestAbs(lastRow);
    report(fmt::format("tiny cached step vs full pass ({} products)", c.name).c_str(), gap, c.logitGap);
    EXPECT_LT(gap, c.logitGap);
  }
}

// Decoding with bf16 copies of the product weights (a continuation's default) stays within
// kHalfWeightLogitGap of exact on the tiny model's cached step; the copies are read while they
// live and not after.
TEST(Fast, HalfWeightDecodingWithinTolerance) {
  auto h = makeFast();
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  const auto w = tinyOn(h);
  const auto floats = cachedStepLogits(h, w);
  std::vector<Scalar> halves;
  {
    auto half = ok(h.halveWeights(w));
    halves = cachedStepLogits(h, w);
    auto second = h.halveWeights(w);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.error().message.find("already in use"), std::string::npos) << second.error().message;
  }
  EXPECT_TRUE(osprey::testing::sameBits(cachedStepLogits(h, w), floats)) << "the copies were read after they were gone";
  const auto want = cachedStepLogits(exact, tinyOn(exact));
  for (Scalar x : halves) ASSERT_TRUE(std::isfinite(x));
  const double gap = largestGap(halves, want) / largestAbs(want);
  report("tiny cached step with bf16 weights vs exact", gap, kHalfWeightLogitGap);
  EXPECT_GT(largestGap(halves, floats), 0.0) << "the step did not read the bf16 copies";
  EXPECT_LT(gap, kHalfWeightLogitGap);
}

TEST(Fast, GreedyTokenIsTheFirstMaximum) {
  auto h = makeFast();
  greedyTokenIsTheFirstMaximum(h);
}

// The device-side argmax: the first of equal maxima, NaN never the answer, and all NaN or a largest
// logit that is not finite an error.
TEST(Fast, DeviceArgmaxKeepsTheContract) {
  auto h = makeFast();
  const Scalar nan = std::nan("");
  auto tokenOf = [&](std::vector<Scalar> values) { return greedyToken(h, ok(h.fromList(std::span<const Scalar>(values)))); };
  EXPECT_EQ(ok(tokenOf({nan, 2.0, nan, 2.0, -1.0})), 1);
  // As on the exact handlers: a largest logit that is not finite picks no token.
  for (std::vector<Scalar> broken : {std::vector<Scalar>{-INFINITY, -INFINITY}, std::vector<Scalar>{1.0, INFINITY, 2.0},
                                     std::vector<Scalar>{nan, -INFINITY}}) {
    auto overflowed = tokenOf(broken);
    ASSERT_FALSE(overflowed.ok()) << "token " << *overflowed;
    EXPECT_NE(overflowed.error().message.find("not finite"), std::string::npos) << overflowed.error().message;
  }
  std::vector<Scalar> many(50257, -3.0);
  many[50000] = 5.0;
  many[40000] = 5.0;
  EXPECT_EQ(ok(tokenOf(many)), 40000);
  auto none = tokenOf({nan, nan, nan});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no maximum"), std::string::npos) << none.error().message;
}

TEST(Fast, GenerationChecksTheContext) {
  auto h = makeFast();
  generationChecksTheContext(h);
}

// The LayerNorm inside a one-row linear layer's kernel (normLinear, normLinearGelu) computes the
// same floats as layernormForward followed by the layer.
TEST(Fast, NormalisedRowEqualsLayerNormThenLinear) {
  auto h = makeFast();
  auto read = [&](const FastHandler::Buffer& b) { return osprey::testing::readAll(h, b); };
  for (Index C : {31, 768, 1600}) {  // 1600 (GPT-2 XL): the row normalised element by element
    for (Index OC : {5, 2304}) {
      SCOPED_TRACE(::testing::Message() << "C " << C << " OC " << OC);
      auto x = ok(h.build(C, Mixed{21})), lw = ok(h.build(C, Mixed{22})), lb = ok(h.build(C, Mixed{23}));
      auto wT = ok(h.build(OC * C, Mixed{24})), bias = ok(h.build(OC, Mixed{25}));
      const auto ln = ok(h.layernormForward(x, lw, lb, 1, C));
      EXPECT_SAME_BITS(read(ok(h.normLinear(x, lw, lb, wT, bias, 1, C, OC))), read(ok(h.linear(ln.out, wT, bias, 1, C, OC))));
      EXPECT_SAME_BITS(read(ok(h.normLinearGelu(x, lw, lb, wT, bias, 1, C, OC))),
                read(ok(h.linearGelu(ln.out, wT, bias, 1, C, OC))));
      EXPECT_SAME_BITS(read(ok(h.normLogits(x, lw, lb, wT, 1, C, OC))),
                read(ok(h.matmulForwardTransposed(ln.out, wT, 1, C, OC))));
    }
  }
  auto x = ok(h.build(3, Mixed{21})), w = ok(h.build(3, Mixed{22}));
  auto wrong = h.normLinear(x, w, w, w, w, 1, 4, 1);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("layernorm: weight has 3 elements, expected 4"), std::string::npos)
      << wrong.error().message;
}

// The tiny model with its position embeddings scaled up: its greedy continuation then moves from
// token to token with the position, so a replay that did not advance would show.
ForwardWeights<FastHandler> positionalTiny(FastHandler& h) {
  HostWeights host = tinyWeights();
  for (Scalar& x : host.tensors[kWpeIndex].values) x *= 200.0;
  return ok(prepareForward(h, ok(upload(h, host))));
}

// Decoding replayed from one recorded step (a CUDA graph) gives the tokens of the step-by-step
// continuation, streamed in order; prompts from one token to three short of the context, reading
// bf16 copies of the weights and the floats.
TEST(Fast, RecordedDecodingEqualsStepByStep) {
  auto h = makeFast();
  const auto w = positionalTiny(h);
  const auto before = fullLogits(h, w, kPrompt);
  std::vector<int> nearTheEnd(static_cast<std::size_t>(w.config.maxT - 3));
  for (std::size_t i = 0; i < nearTheEnd.size(); ++i) nearTheEnd[i] = static_cast<int>((i * 7919) % 50257);
  for (const auto weights : {FastHandler::DecodeWeights::Bf16, FastHandler::DecodeWeights::Float})
  for (const std::vector<int>& prompt : {kPrompt, std::vector<int>{464}, nearTheEnd}) {
    SCOPED_TRACE(::testing::Message() << prompt.size() << "-token prompt, "
                                      << (weights == FastHandler::DecodeWeights::Bf16 ? "bf16" : "float") << " weights");
    h.setDecodeWeights(weights);
    const Index count = std::min<Index>(40, w.config.maxT - static_cast<Index>(prompt.size()));
    auto continuation = [&](bool graphs, std::vector<int>* streamed) {
      h.setDecodeGraphs(graphs);
      return ok(generateGreedy(h, w, std::span<const int>(prompt), count, [&](int id) -> osprey::Result<void> {
        streamed->push_back(id);
        return {};
      }));
    };
    std::vector<int> streamedReplayed, streamedStepped;
    const auto replayed = continuation(true, &streamedReplayed);
    const auto stepped = continuation(false, &streamedStepped);
    EXPECT_EQ(replayed, stepped);
    EXPECT_EQ(streamedReplayed, replayed);
    EXPECT_EQ(replayed.size(), static_cast<std::size_t>(count));
    EXPECT_EQ(h.stream(), nullptr) << "the recording's stream outlived it";
    if (count >= 40) {  // a constant continuation would not show a replay stuck at one position
      const std::set<int> distinct(replayed.begin(), replayed.end());
      EXPECT_GE(distinct.size(), 10u) << "the continuation is too uniform to test the replay";
    }
  }
  // The device works as before afterwards: the full pass gives what it gave before.
  EXPECT_SAME_BITS(fullLogits(h, w, kPrompt), before);
}

// A continuation whose logits have no maximum (all NaN) stops with the argmax's error and streams
// nothing after it: at the first token (the prompt's logits, chosen on the device before the first
// replay) and in a replay (the lm head's own choice), as the step-by-step continuation does; the
// device works as before afterwards.
TEST(Fast, RecordedDecodingStopsAtLogitsWithoutAMaximum) {
  auto h = makeFast();
  const Index C = tinyWeights().config.C, maxT = tinyWeights().config.maxT;
  for (const Index from : {Index{0}, Index{8}}) {  // every position's embedding NaN from `from` on
    SCOPED_TRACE(::testing::Message() << "wpe NaN from position " << from);
    HostWeights host = tinyWeights();
    for (Index i = from * C; i < maxT * C; ++i) host.tensors[kWpeIndex].values[static_cast<std::size_t>(i)] = std::nan("");
    const auto w = ok(prepareForward(h, ok(upload(h, host))));
    std::vector<int> streamed[2];
    for (const bool graphs : {true, false}) {
      h.setDecodeGraphs(graphs);
      auto refused = generateGreedy(h, w, std::span<const int>(kPrompt), 20, [&](int id) -> osprey::Result<void> {
        streamed[graphs].push_back(id);
        return {};
      });
      ASSERT_FALSE(refused.ok());
      EXPECT_NE(refused.error().message.find("no maximum"), std::string::npos) << refused.error().message;
      EXPECT_EQ(h.stream(), nullptr);
    }
    // Positions 5, 6 and 7 have their tokens; the step at position 8 reads a NaN embedding.
    EXPECT_EQ(streamed[1].size(), from == 0 ? 0u : 4u);
    EXPECT_EQ(streamed[1], streamed[0]);
  }
  const auto w = tinyOn(h);
  EXPECT_EQ(ok(generateGreedy(h, w, std::span<const int>(kPrompt), 5, [](int) -> osprey::Result<void> { return {}; }))
                .size(),
            5u);
}

// A recording refuses a cache that does not fit the model, and leaves the device as it was.
TEST(Fast, RecordingRefusesAForeignCache) {
  auto h = makeFast();
  const auto w = tinyOn(h);
  auto step = ok(prefill(h, w, tokensOn(h, kPrompt), static_cast<Index>(kPrompt.size())));
  step.cache.layers.pop_back();
  auto none = [](int) -> osprey::Result<void> { return {}; };
  auto refused = continueGreedy(h, w, step, 5, none);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("the cache has 1 blocks, the model 2"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(h.stream(), nullptr);
  EXPECT_EQ(ok(generateGreedy(h, w, std::span<const int>(kPrompt), 3, none)).size(), 3u);
}

// Loss and every gradient of one training step, fast against exact.
template <class H>
std::pair<Scalar, std::vector<std::vector<Scalar>>> gradientsOf(H& h, const HostWeights& host, const data::Batch& batch) {
  auto w = ok(upload(h, host));
  auto g = ok(train::batchGradients(h, w, batch, 0));
  return {g.loss, osprey::testing::train::allValues(h, g.grads)};
}

// The loss and every gradient on fast, with each kind of product, against one exact step.
void trainingStepWithinTolerance(const HostWeights& host, const data::Batch& batch, const char* label) {
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  const auto [lossExact, gradsExact] = gradientsOf(exact, host, batch);
  const auto specs = parameterSpecs(host.config);
  for (const ProductsCase& c : kProductsCases) {
    SCOPED_TRACE(c.name);
    auto fast = makeFast();
    fast.setProducts(c.products);
    const auto [lossFast, gradsFast] = gradientsOf(fast, host, batch);
    // Of the outputs read only as bf16, the step reads the floats of one: the final LayerNorm's,
    // which the padded lm head backward's one-hot share gathers (bf16 products; TF32 defers none).
    const bool paddedHead = fast_detail::padsRows(batch.B * batch.T, host.config.V);
    EXPECT_EQ(fast.deferredFloatsWritten(), c.products == FastHandler::Products::Bf16 && paddedHead ? 1 : 0);
    const double lossGap = std::abs(lossFast - lossExact) / std::abs(lossExact);
    std::printf("[ measured ] %s loss %.9g (exact %.9g), %s products\n", label, lossFast, lossExact, c.name);
    report(fmt::format("loss |Δ| / loss ({} products)", c.name).c_str(), lossGap, c.lossGap);
    EXPECT_LT(lossGap, c.lossGap);
    ASSERT_EQ(gradsFast.size(), gradsExact.size());
    double worst = 0.0;
    for (std::size_t t = 0; t < gradsExact.size(); ++t) {
      const double gap = relativeNormGap(gradsFast[t], gradsExact[t]);
      worst = std::max(worst, gap);
      EXPECT_LT(gap, c.gradientGap) << specs[t].name;
    }
    report(fmt::format("gradient ‖Δg‖ / ‖g‖, worst tensor ({} products)", c.name).c_str(), worst, c.gradientGap);
  }
}

TEST(Fast, SmallTrainingStepWithinTolerance) {
  using namespace osprey::testing::train;
  trainingStepWithinTolerance(smallWeights(), smallBatch(3, 7, kSmall.V), "small model");
}

TEST(Fast, Gpt2TrainingStepWithinTolerance) {
  using namespace osprey::testing::train;
  static const HostWeights weights = initialWeights(kGpt2_124M, kDefaultSeed);
  trainingStepWithinTolerance(weights, smallBatch(4, 64, kGpt2_124M.V), "124M B4 T64");
}

// Every GPT-2 size's width and head count at one block (its initialisation; 12, 16, 20 and 25
// heads of 64, widths 768 to 1600, the full vocabulary): the logits of every prompt position and a
// cached step, with each kind of product, and a training step, within the tolerances against
// exact; and a recorded greedy continuation. The kernels take each shape on their own paths
// (fast/shape_support.hpp: flash attention throughout, the LayerNorm rows held in 6 to 13 groups a
// lane by width, GELU's column sums at every 4C, fewer groups with TF32 products).
TEST(Fast, EveryGpt2SizeAtOneBlockWithinTolerance) {
  using namespace osprey::testing::train;
  auto exact = osprey::testing::makeHandler<GpuCuda>();
  for (std::size_t p = 0; p < 4; ++p) {
    const Preset& size = kPresets[p];
    SCOPED_TRACE(size.name);
    Config c = size.config;
    c.L = 1;
    const HostWeights weights = initialWeights(c, kDefaultSeed);
    ASSERT_FALSE(fast_shapes::decodingProblem(c).has_value());
    ASSERT_TRUE(fast_kernels::flashFits(4, c.C, c.NH));
    const auto wantFull = fullLogits(exact, forwardOn(exact, weights), kPrompt);
    const auto wantStep = cachedStepLogits(exact, forwardOn(exact, weights));
    for (const ProductsCase& k : kProductsCases) {
      SCOPED_TRACE(k.name);
      auto fast = makeFast();
      fast.setProducts(k.products);
      const auto w = forwardOn(fast, weights);
      const double full = largestGap(fullLogits(fast, w, kPrompt), wantFull) / largestAbs(wantFull);
      const double step = largestGap(cachedStepLogits(fast, w), wantStep) / largestAbs(wantStep);
      report(fmt::format("{} (1 block) logits, {} products", size.name, k.name).c_str(), full, k.logitGap);
      report(fmt::format("{} (1 block) cached step, {} products", size.name, k.name).c_str(), step, k.logitGap);
      EXPECT_LT(full, k.logitGap);
      EXPECT_LT(step, k.logitGap);
      // The recorded continuation (a CUDA graph of the step, bf16 weight copies) against the same
      // continuation step by step without the graph.
      const auto none = [](int) -> osprey::Result<void> { return {}; };
      const auto recorded = ok(generateGreedy(fast, w, std::span<const int>(kPrompt), 6, none));
      fast.setDecodeGraphs(false);
      EXPECT_EQ(ok(generateGreedy(fast, w, std::span<const int>(kPrompt), 6, none)), recorded);
    }
    trainingStepWithinTolerance(weights, smallBatch(4, 64, c.V),
                                fmt::format("{} (1 block) B4 T64", size.name).c_str());
  }
}

}  // namespace
}  // namespace gpt2::testing
