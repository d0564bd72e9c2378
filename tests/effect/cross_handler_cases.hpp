// Cross-handler bit identity: the same computation answered by two handlers A and B must give
// the same doubles, compared by bit pattern (DESIGN.md §4, "Exact"). Inputs are large and
// random so that every rounding step is exercised; matMul shapes sit on and just past the host
// device's tile edges (4 rows, 16 columns, 256-deep k panels).
//
// Written over any pair of handlers: the host binary pairs lists with gpu/host; a device binary
// can pair lists with its own handler.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "osprey/effect.hpp"
#include "osprey/strict.hpp"

namespace osprey::testing::cross_handler {

// A kernel with index maths that gathers from two buffers: out[i] = x[(i * 7919) % n] - y[i] / 3.
template <class H>
Result<BufferOf<H>> gatherMix(H& h, const BufferOf<H>& x, const BufferOf<H>& y) {
  const View vx = x.view(), vy = y.view();
  const Index n = vx.n;
  return h.build(n, [=] OSPREY_FN(Index i) -> Scalar {
    return vx[(Int(i) * Int(7919)) % Int(n)] - vy[i] / 3.0;
  });
}

template <class H>
Result<BufferOf<H>> zipAffineRatio(H& h, const BufferOf<H>& x, const BufferOf<H>& y) {
  return h.zipWith(x, y, [=] OSPREY_FN(Scalar a, Scalar b) -> Scalar { return a * b + a / (b + 2.0); });
}

template <class H>
Result<Scalar> foldWeighted(H& h, const BufferOf<H>& x) {
  return h.reduce(x, 0.25, [=] OSPREY_FN(Scalar acc, Scalar v) -> Scalar { return acc * 0.999 + v * v; });
}

// Every intermediate of one pipeline, brought back to the host.
struct PipelineBits {
  std::vector<Scalar> gathered, zipped;
  Scalar folded = 0.0;
};

template <class H>
PipelineBits runPipeline(H& h, const std::vector<Scalar>& xs, const std::vector<Scalar>& ys) {
  PipelineBits out;
  auto x = h.fromList(xs);
  auto y = h.fromList(ys);
  if (!x.ok() || !y.ok()) throw std::runtime_error("fromList failed");
  auto g = gatherMix(h, *x, *y);
  if (!g.ok()) throw std::runtime_error(g.error().message);
  auto z = zipAffineRatio(h, *g, *y);
  if (!z.ok()) throw std::runtime_error(z.error().message);
  auto f = foldWeighted(h, *z);
  if (!f.ok()) throw std::runtime_error(f.error().message);
  out.gathered = readAll(h, *g);
  out.zipped = readAll(h, *z);
  out.folded = *f;
  return out;
}

template <class A, class B>
void elementwisePipelineIsBitIdentical(A& a, B& b) {
  for (std::size_t n : {std::size_t{1}, std::size_t{4097}, std::size_t{50257}, std::size_t{262147}}) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    const auto xs = randomValues(n, 1000 + n, -3.0, 3.0);
    const auto ys = randomValues(n, 2000 + n, -3.0, 3.0);
    const PipelineBits pa = runPipeline(a, xs, ys);
    const PipelineBits pb = runPipeline(b, xs, ys);
    EXPECT_EQ(firstBitDifference(pa.gathered, pb.gathered), n) << "build: first differing element";
    EXPECT_EQ(firstBitDifference(pa.zipped, pb.zipped), n) << "zipWith: first differing element";
    EXPECT_TRUE(sameBits(std::vector<Scalar>{pa.folded}, std::vector<Scalar>{pb.folded}))
        << "reduce: " << pa.folded << " vs " << pb.folded;
  }
}

struct Shape {
  Index rows, inner, cols;
};

// Rows not a multiple of 4, columns not a multiple of 16, inner past one or more 256-deep panels.
inline constexpr Shape kEdgeShapes[] = {
    {5, 257, 17}, {3, 300, 15}, {4, 256, 16}, {8, 512, 32}, {9, 513, 33}, {130, 600, 47},
    {1, 1000, 1}, {67, 769, 131}, {12, 1, 48}, {31, 64, 100}, {64, 768, 3},
};

template <class H>
std::vector<Scalar> matMulOn(H& h, const std::vector<Scalar>& a, const std::vector<Scalar>& b, Shape s) {
  auto da = h.fromList(a);
  auto db = h.fromList(b);
  if (!da.ok() || !db.ok()) throw std::runtime_error("fromList failed");
  auto c = h.matMul(*da, *db, s.rows, s.inner, s.cols);
  if (!c.ok()) throw std::runtime_error(c.error().message);
  return readAll(h, *c);
}

template <class A, class B>
void matMulIsBitIdentical(A& a, B& b) {
  std::uint64_t seed = 77;
  for (Shape s : kEdgeShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.inner << "x" << s.cols);
    // Wide dynamic range: products of very different magnitudes make rounding order visible.
    auto x = randomValues(static_cast<std::size_t>(s.rows * s.inner), seed++, -1.0, 1.0);
    auto y = randomValues(static_cast<std::size_t>(s.inner * s.cols), seed++, -1.0, 1.0);
    for (std::size_t i = 0; i < x.size(); i += 3) x[i] *= 1e8;
    const auto ca = matMulOn(a, x, y, s);
    const auto cb = matMulOn(b, x, y, s);
    const std::size_t at = firstBitDifference(ca, cb);
    ASSERT_EQ(at, ca.size()) << "output " << at << ": " << ca[at] << " vs " << cb[at];
  }
}

}  // namespace osprey::testing::cross_handler
