// The host's vector lanes (osprey/gpu/host/lanes.hpp) compute the shared maths bit for bit as the
// double code does: exp, log, tanh and GELU's two elements over lanes against the same functions of
// each lane's double, on every special value and a million fixed-seed arguments in the regimes the
// model meets; and gpu/host's GELU (gpt2/host/gelu_lanes.cpp) against lists' on lengths that end
// inside a block of lanes. Bits are compared (memcmp), so -0.0 against +0.0 or two NaN patterns fail.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpt2/layers/gelu.hpp"
#include "handlers.hpp"
#include "osprey/gpu/host/lanes.hpp"
#include "osprey/math.hpp"

namespace lanes_test {

using osprey::lanes::kLanes;
using osprey::lanes::Lanes;

// Every special value the maths branch on, then fixed-seed arguments: any bit pattern, and
// uniform over exp's whole range, GELU's and softmax's working ranges and near zero.
std::vector<double> arguments() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> x = {0.0,       -0.0,        inf,          -inf,         std::numeric_limits<double>::quiet_NaN(),
                           0x1p-1074, -0x1p-1074,  0x1p-1022,    -0x1p-1022,   0x1.fffffffffffffp-1023,
                           709.78,    709.79,      710.0,        -745.1,       -745.2,
                           -746.0,    -708.39,     -708.4,       -1022.5,      22.0,
                           22.000001, -22.000001,  0x1p-27,      0x1.fffffp-28, 0x1p-54,
                           -0x1p-54,  0x1.1p-54,   1e-300,       44.0,         -44.0,
                           1.0,       -1.0,        0.5,          2.0,          std::numeric_limits<double>::max()};
  std::mt19937_64 engine(20261205);
  const auto unit = [&] { return static_cast<double>(engine() >> 11) * 0x1p-53; };
  for (int i = 0; i < (1 << 20); ++i) {
    double v = 0.0;
    switch (i % 5) {
      case 0: {
        const std::uint64_t bits = engine();
        std::memcpy(&v, &bits, sizeof v);
        break;
      }
      case 1: v = -750.0 + 1500.0 * unit(); break;
      case 2: v = -25.0 + 50.0 * unit(); break;
      case 3: v = -5.0 + 10.0 * unit(); break;
      default: v = (unit() - 0.5) * 0x1p-20; break;
    }
    x.push_back(v);
  }
  x.push_back(std::numeric_limits<double>::signaling_NaN());
  while (x.size() % kLanes != 0) x.push_back(-x.back());
  return x;
}

// f over lanes, block by block, against f of each double; the first few differences are printed.
template <class Scalar1, class OverLanes>
void expectLaneByLane(const char* name, const std::vector<double>& x, Scalar1 scalar, OverLanes overLanes) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < x.size(); i += kLanes) {
    double got[kLanes];
    overLanes(Lanes::load(&x[i])).store(got);
    for (int j = 0; j < kLanes; ++j) {
      const double want = scalar(x[i + j]);
      if (std::memcmp(&got[j], &want, sizeof want) != 0 && ++differ <= 3)
        ADD_FAILURE() << name << "(" << std::hexfloat << x[i + j] << "): lanes " << got[j] << ", double " << want;
    }
  }
  EXPECT_EQ(differ, 0u) << name << ": lanes that differ from the double code, of " << x.size();
}

TEST(HostLanes, ExpLogAndTanhAreTheDoubleCodeInEveryLane) {
  const auto x = arguments();
  expectLaneByLane("exp", x, [](double v) { return osprey::math::exp(v); }, [](Lanes v) { return osprey::math::exp(v); });
  expectLaneByLane("log", x, [](double v) { return osprey::math::log(v); }, [](Lanes v) { return osprey::math::log(v); });
  expectLaneByLane("tanh", x, [](double v) { return osprey::math::tanh(v); },
                   [](Lanes v) { return osprey::math::tanh(v); });
}

TEST(HostLanes, GeluAndItsSlopeAreTheDoubleCodeInEveryLane) {
  const auto x = arguments();
  expectLaneByLane("geluValue", x, [](double v) { return gpt2::geluValue(v); },
                   [](Lanes v) { return gpt2::geluValue(v); });
  // The slope with a second operand that varies too: dout = 1 - x/3 (and its specials).
  expectLaneByLane("geluSlope", x, [](double v) { return gpt2::geluSlope(1.0 - v / 3.0, v); },
                   [](Lanes v) { return gpt2::geluSlope(1.0 - v / 3.0, v); });
}

// gpu/host's GELU (over lanes, the last block partial) against lists' (the double code).
TEST(HostLanes, GpuHostGeluIsListsBitForBitOnEveryLength) {
  auto lists = osprey::testing::makeHandler<osprey::Lists>();
  auto host = osprey::testing::makeHandler<osprey::GpuHost>();
  const auto all = arguments();
  for (const std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{5}, std::size_t{7},
                              std::size_t{4099}, std::size_t{65537}}) {
    const std::vector<double> x(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<double> d(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = 1.0 - x[n - 1 - i] / 7.0;
    const auto lx = lists.fromList(x).value(), ld = lists.fromList(d).value();
    const auto hx = host.fromList(x).value(), hd = host.fromList(d).value();
    const auto wantForward = osprey::testing::readAll(lists, gpt2::geluForward(lists, lx).value());
    const auto gotForward = osprey::testing::readAll(host, gpt2::geluForward(host, hx).value());
    const auto wantBackward = osprey::testing::readAll(lists, gpt2::geluBackward(lists, ld, lx).value());
    const auto gotBackward = osprey::testing::readAll(host, gpt2::geluBackward(host, hd, hx).value());
    ASSERT_EQ(gotForward.size(), n);
    ASSERT_EQ(gotBackward.size(), n);
    EXPECT_EQ(std::memcmp(gotForward.data(), wantForward.data(), n * sizeof(double)), 0) << "forward, n = " << n;
    EXPECT_EQ(std::memcmp(gotBackward.data(), wantBackward.data(), n * sizeof(double)), 0) << "backward, n = " << n;
  }
}

}  // namespace lanes_test
