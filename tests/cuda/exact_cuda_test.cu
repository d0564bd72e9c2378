// The commands' exact cuda handler (gpt2/cuda/exact_cuda.hpp): the layers it answers in fewer
// launches give the reference's doubles bit for bit (the typed tests and gpu-check's digests
// check the model as a whole).
#include <gtest/gtest.h>

#include <cmath>
#include <concepts>
#include <random>
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

// The model's calls reach the one-launch layers: the derived-operation hook (OSPREY_GPT2_DERIVED)
// selects a member of this name and arguments.
static_assert(requires(ExactCuda& h, const ExactCuda::Buffer& b, Index n) {
  { h.layernormForward(b, b, b, n, n) } -> std::same_as<osprey::Result<LayerNormOut<ExactCuda>>>;
  { h.layernormBackward(b, b, b, b, b, n, n) } -> std::same_as<osprey::Result<LayerNormGrads<ExactCuda>>>;
});

}  // namespace
}  // namespace gpt2::testing
