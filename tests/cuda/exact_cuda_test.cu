// The commands' exact cuda handler (gpt2/cuda/exact_cuda.hpp): the layers it answers in fewer
// launches give the reference's doubles bit for bit (the typed tests and gpu-check's digests
// check the model as a whole).
#include <gtest/gtest.h>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpt2/cuda/exact_cuda.hpp"
#include "handlers.hpp"

namespace gpt2::testing {
namespace {

using osprey::Index;
using osprey::Scalar;

ExactCuda makeExact() {
  auto device = osprey::CudaDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return ExactCuda(*device);
}

template <class T>
T ok(osprey::Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}

std::vector<Scalar> read(ExactCuda& h, const ExactCuda::Buffer& b) { return osprey::testing::readAll(h, b); }

struct Shape {
  Index N, C;
};
// One row (decoding) and many, GPT-2's widths, ragged and tiny ones, the longest rows the blocks'
// shared memory holds (5887 forward, 2943 backward) and one beyond each (the reference's own path).
constexpr Shape kShapes[] = {{1, 768},  {1, 1},     {1, 1600},  {5, 768},   {3, 1600}, {64, 1024}, {4096, 768},
                             {7, 13},   {9, 5887},  {2, 5888},  {5, 2943},  {3, 2944}, {33, 1280}};

// Rows of four kinds: plain values, large values with a small spread (the variance's
// cancellation), wide exponents, and zeros, negative zeros and tiny values.
std::vector<Scalar> rowsOfFourKinds(std::mt19937_64& rng, Index N, Index C) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<Scalar> x(static_cast<std::size_t>(N * C));
  for (std::size_t i = 0; i < x.size(); ++i) {
    switch ((static_cast<Index>(i) / C) % 4) {
      case 0: x[i] = unit(rng); break;
      case 1: x[i] = 1e6 + unit(rng) * 1e-3; break;
      case 2: x[i] = std::ldexp(unit(rng), exponent(rng)); break;
      default: x[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? -0.0 : unit(rng) * 1e-300; break;
    }
  }
  return x;
}

std::vector<Scalar> weights(std::mt19937_64& rng, Index C, double scale) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<Scalar> w(static_cast<std::size_t>(C));
  for (std::size_t c = 0; c < w.size(); ++c) w[c] = c % 5 == 0 ? -0.0 : unit(rng) * scale;
  return w;
}

// out, mean and rstd of the one-launch forward == the reference's.
TEST(ExactCuda, OneLaunchLayerNormIsTheReferences) {
  auto h = makeExact();
  std::mt19937_64 rng(4242);
  for (const Shape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.N << " rows of " << s.C);
    const auto x = ok(h.fromList(rowsOfFourKinds(rng, s.N, s.C)));
    const auto w = ok(h.fromList(weights(rng, s.C, 2.0))), b = ok(h.fromList(weights(rng, s.C, 1.0)));
    const auto fused = ok(h.layernormForward(x, w, b, s.N, s.C));
    const auto ref = ok(reference::layernormForward(h, x, w, b, s.N, s.C));
    EXPECT_SAME_BITS(read(h, fused.out), read(h, ref.out));
    EXPECT_SAME_BITS(read(h, fused.mean), read(h, ref.mean));
    EXPECT_SAME_BITS(read(h, fused.rstd), read(h, ref.rstd));
  }
}

// dx, dw and db of the one-launch backward == the reference's, from the reference forward's mean
// and rstd and gradients of the same four kinds.
TEST(ExactCuda, OneLaunchLayerNormBackwardIsTheReferences) {
  auto h = makeExact();
  std::mt19937_64 rng(4343);
  for (const Shape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.N << " rows of " << s.C);
    const auto x = ok(h.fromList(rowsOfFourKinds(rng, s.N, s.C)));
    const auto w = ok(h.fromList(weights(rng, s.C, 2.0))), b = ok(h.fromList(weights(rng, s.C, 1.0)));
    const auto fwd = ok(reference::layernormForward(h, x, w, b, s.N, s.C));
    const auto dout = ok(h.fromList(rowsOfFourKinds(rng, s.N, s.C)));
    const auto fused = ok(h.layernormBackward(dout, x, w, fwd.mean, fwd.rstd, s.N, s.C));
    const auto ref = ok(reference::layernormBackward(h, dout, x, w, fwd.mean, fwd.rstd, s.N, s.C));
    EXPECT_SAME_BITS(read(h, fused.dx), read(h, ref.dx));
    EXPECT_SAME_BITS(read(h, fused.dw), read(h, ref.dw));
    EXPECT_SAME_BITS(read(h, fused.db), read(h, ref.db));
  }
}

// Scores of softmax rows of seven kinds, by row: plain values, wide exponents, ties among ±0 and
// ±1, values far apart (exp underflows to subnormals and 0), infinities of both signs (inf - inf
// gives NaN probabilities), NaN in the first column (the maximum keeps it) and NaN elsewhere (the
// maximum skips it, the sum does not).
std::vector<Scalar> scoresOfSevenKinds(std::mt19937_64& rng, Index R, Index T) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 12);
  std::uniform_int_distribution<int> pick(0, 15);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Scalar> s(static_cast<std::size_t>(R * T));
  for (Index r = 0; r < R; ++r) {
    for (Index c = 0; c < T; ++c) {
      double& v = s[static_cast<std::size_t>(r * T + c)];
      const int p = pick(rng);
      switch (r % 7) {
        case 0: v = unit(rng) * 8.0; break;
        case 1: v = std::ldexp(unit(rng), exponent(rng)); break;
        case 2: v = p % 4 == 0 ? 0.0 : p % 4 == 1 ? -0.0 : p % 4 == 2 ? 1.0 : -1.0; break;
        case 3: v = unit(rng) * 6000.0; break;
        case 4: v = p == 0 ? inf : p == 1 ? -inf : unit(rng); break;
        case 5: v = c == 0 ? nan : unit(rng); break;
        default: v = p == 0 ? nan : unit(rng); break;
      }
    }
  }
  return s;
}

struct SoftmaxShape {
  Index sequences, T, headSize;
};
constexpr SoftmaxShape kSoftmaxShapes[] = {{1, 1, 64},  {3, 5, 64},   {2, 31, 64},   {2, 32, 48},   {3, 33, 64},
                                           {4, 64, 64}, {2, 100, 48}, {1, 1024, 64}, {1, 1100, 64}, {48, 70, 64}};

// For every shape: scores of the seven kinds on the exact handler, handed to check(h, rng, scores,
// R, T, scale) with the same generator, which draws whatever else the check needs after them.
template <class Check>
void onEverySoftmaxShape(std::uint64_t seed, Check check) {
  auto h = makeExact();
  std::mt19937_64 rng(seed);
  for (const SoftmaxShape s : kSoftmaxShapes) {
    SCOPED_TRACE(::testing::Message() << s.sequences << " sequences of " << s.T << ", head size " << s.headSize);
    const Index R = s.sequences * s.T;
    const osprey::math::DivideBy scale(osprey::math::sqrt(static_cast<Scalar>(s.headSize)));
    const auto scores = ok(h.fromList(scoresOfSevenKinds(rng, R, s.T)));
    check(h, rng, scores, R, s.T, scale);
  }
}

// The exact cuda handler's causal softmax == the reference's table (maxima and sums as row folds,
// then the build), for rows shorter and longer than a fold's 256-column chunk, sequences that end
// inside a fold block's rows, and a divisor that divides (48) beside GPT-2's, which multiplies (64).
TEST(ExactCuda, CausalSoftmaxIsTheReferences) {
  onEverySoftmaxShape(4444, [](ExactCuda& h, std::mt19937_64&, const ExactCuda::Buffer& scores, Index R, Index T,
                               osprey::math::DivideBy scale) {
    const auto fused = ok(h.causalSoftmax(scores, R, T, scale));
    const auto ref = ok(reference::causalSoftmax(h, scores, R, T, scale));
    EXPECT_SAME_BITS(read(h, fused), read(h, ref));
  });
}

// The exact cuda handler's backward == the reference's dscore, from the reference's probabilities
// of scores of the same kinds and gradients of the same kinds (the dot product's cancellations,
// NaN and infinities included).
TEST(ExactCuda, CausalSoftmaxBackwardIsTheReferences) {
  onEverySoftmaxShape(4545, [](ExactCuda& h, std::mt19937_64& rng, const ExactCuda::Buffer& scores, Index R, Index T,
                               osprey::math::DivideBy scale) {
    const auto att = ok(reference::causalSoftmax(h, scores, R, T, scale));
    const auto datt = ok(h.fromList(scoresOfSevenKinds(rng, R, T)));
    const auto fused = ok(h.causalSoftmaxBackward(att, datt, R, T, scale));
    const auto ref = ok(reference::causalSoftmaxBackward(h, att, datt, R, T, scale));
    EXPECT_SAME_BITS(read(h, fused), read(h, ref));
  });
}

// The shape checks come before either path: a table of the wrong length, rows that are not whole
// sequences, a gradient of the wrong length.
TEST(ExactCuda, CausalSoftmaxRefusesAWrongShape) {
  auto h = makeExact();
  const osprey::math::DivideBy scale(8.0);
  const auto scores = ok(h.fromList(std::vector<Scalar>(12, 0.5)));
  const auto wrongLength = detail::causalSoftmax(h, scores, 4, 4, scale);
  ASSERT_FALSE(wrongLength.ok());
  EXPECT_NE(wrongLength.error().message.find("scores has 12 elements, expected 16"), std::string::npos)
      << wrongLength.error().message;
  const auto partial = detail::causalSoftmax(h, scores, 3, 4, scale);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("3 rows are not whole sequences of 4"), std::string::npos)
      << partial.error().message;
  const auto att = ok(h.fromList(std::vector<Scalar>(16, 0.5)));
  const auto wrongGradient = detail::causalSoftmaxBackward(h, att, scores, 4, 4, scale);
  ASSERT_FALSE(wrongGradient.ok());
  EXPECT_NE(wrongGradient.error().message.find("datt has 12 elements, expected 16"), std::string::npos)
      << wrongGradient.error().message;
}

// The model's calls reach the one-launch layers: the derived-operation hook (OSPREY_GPT2_DERIVED)
// selects a member of this name and arguments.
static_assert(requires(ExactCuda& h, const ExactCuda::Buffer& b, Index n) {
  { h.layernormForward(b, b, b, n, n) } -> std::same_as<osprey::Result<LayerNormOut<ExactCuda>>>;
  { h.layernormBackward(b, b, b, b, b, n, n) } -> std::same_as<osprey::Result<LayerNormGrads<ExactCuda>>>;
  { h.causalSoftmax(b, n, n, osprey::math::DivideBy(8.0)) } -> std::same_as<osprey::Result<ExactCuda::Buffer>>;
  {
    h.causalSoftmaxBackward(b, b, n, n, osprey::math::DivideBy(8.0))
  } -> std::same_as<osprey::Result<ExactCuda::Buffer>>;
});

}  // namespace
}  // namespace gpt2::testing
