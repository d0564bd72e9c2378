// The shared-source exp, log and tanh traced into opencl kernels: every result's bits equal the
// host's, over inputs that reach each branch (NaN, infinities, zeros, subnormal inputs and
// results, overflow edges, tiny and huge arguments, and a wide random sweep).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "osprey/math.hpp"

namespace osprey::testing {
namespace {

// Values that reach every branch of exp, log and tanh, then a random sweep of exponents.
std::vector<Scalar> mathInputs() {
  const Scalar inf = std::numeric_limits<Scalar>::infinity(), nan = std::numeric_limits<Scalar>::quiet_NaN();
  std::vector<Scalar> xs = {0.0,     -0.0,     1.0,    -1.0,   0.5,          -0.5,        nan,       -nan,
                            inf,     -inf,     709.78, 709.79, 710.0,        -745.1,      -745.2,    -746.0,
                            -708.4,  -708.39,  -720.0, 1e-300, 0x1p-1074,    -0x1p-1074,  0x1p-1022, 0x1.fffffp-1023,
                            0x1p-54, -0x1p-54, 0x1p-55, 0x1p-27, 0x1.0001p-27, 21.999,    22.0,      22.001,
                            -22.5,   1e-10,    44.0,   -44.0,  1.4142135623730951, 0.7071067811865476, 2.0, 1e308};
  std::uint64_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const Scalar unit = static_cast<Scalar>(state >> 11) * 0x1.0p-53;
    const Scalar sign = (state & 1) ? -1.0 : 1.0;
    const int exponent = static_cast<int>((state >> 3) % 24) - 14;  // |x| in [2^-14, 2^10)
    xs.push_back(sign * std::ldexp(1.0 + unit, exponent));
    xs.push_back(std::ldexp(1.0 + unit, static_cast<int>((state >> 17) % 2100) - 1074));  // log's whole range
  }
  return xs;
}

template <class F, class G>
void sameOnOpenCl(F traced, G host) {
  GpuOpenCl h = makeHandler<GpuOpenCl>();
  const std::vector<Scalar> xs = mathInputs();
  auto x = h.fromList(xs);
  ASSERT_TRUE(x.ok()) << x.error().message;
  const View xv = x->view();
  auto y = h.build(xv.n, [=](KernelIndex<GpuOpenCl> i) -> KernelScalar<GpuOpenCl> { return traced(xv[i]); });
  ASSERT_TRUE(y.ok()) << y.error().message;
  const std::vector<Scalar> got = readAll(h, *y);
  std::vector<Scalar> want;
  for (Scalar v : xs) want.push_back(host(v));
  const std::size_t at = firstBitDifference(got, want);
  EXPECT_EQ(at, want.size()) << "x = " << (at < xs.size() ? xs[at] : 0.0) << ": opencl "
                             << (at < got.size() ? got[at] : 0.0) << ", host " << (at < want.size() ? want[at] : 0.0);
}

TEST(OpenClMath, ExpIsTheHostsExp) {
  sameOnOpenCl([](auto v) { return math::exp(v); }, [](Scalar v) { return math::exp(v); });
}
TEST(OpenClMath, LogIsTheHostsLog) {
  sameOnOpenCl([](auto v) { return math::log(v); }, [](Scalar v) { return math::log(v); });
}
TEST(OpenClMath, TanhIsTheHostsTanh) {
  sameOnOpenCl([](auto v) { return math::tanh(v); }, [](Scalar v) { return math::tanh(v); });
}
// sqrt and a written fma are single correctly rounded operations on both.
TEST(OpenClMath, SqrtAndFmaAreTheHosts) {
  sameOnOpenCl([](auto v) { return math::sqrt(math::fma(v, v, 0.25)); },
               [](Scalar v) { return math::sqrt(math::fma(v, v, 0.25)); });
}

}  // namespace
}  // namespace osprey::testing
