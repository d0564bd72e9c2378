// GPT-2's initialisation: deterministic bits for a seed, different for another seed, and the
// distributions of HF's _init_weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gpt2/model/init.hpp"
#include "gpt2/model/init_random.hpp"

namespace gpt2 {
namespace {

bool sameTensorBits(const HostWeights& a, const HostWeights& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i].values;
    const auto& y = b.tensors[i].values;
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(Scalar)) != 0) return false;
  }
  return true;
}

struct Moments {
  double mean, stddev;
};
Moments momentsOf(const std::vector<Scalar>& v) {
  long double s = 0, s2 = 0;
  for (double x : v) {
    s += x;
    s2 += static_cast<long double>(x) * x;
  }
  const long double n = static_cast<long double>(v.size());
  const long double mean = s / n;
  return {static_cast<double>(mean), static_cast<double>(std::sqrt(s2 / n - mean * mean))};
}

TEST(Gpt2Init, SameSeedSameBitsDifferentSeedDifferentBits) {
  const HostWeights a = initialWeights(kGpt2Tiny, 1337);
  const HostWeights b = initialWeights(kGpt2Tiny, 1337);
  const HostWeights c = initialWeights(kGpt2Tiny, 1338);
  EXPECT_TRUE(sameTensorBits(a, b));
  EXPECT_FALSE(sameTensorBits(a, c));
  EXPECT_TRUE(checkShapes(a, "init").ok());
  // Every drawn tensor differs under another seed (not just one of them).
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    if (momentsOf(a.tensors[i].values).stddev > 0) {
      EXPECT_NE(a.tensors[i].values, c.tensors[i].values) << parameterSpecs(kGpt2Tiny)[i].name;
    }
  }
}

TEST(Gpt2Init, DistributionsAreGpt2s) {
  const HostWeights w = initialWeights(kGpt2Tiny, kDefaultSeed);
  const auto specs = parameterSpecs(kGpt2Tiny);
  const double projStd = 0.02 / std::sqrt(2.0 * 2);  // two blocks
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    const auto& v = w.tensors[i].values;
    const bool ln = name.find("ln_") != std::string::npos;
    if (ln && name.ends_with(".weight")) {
      for (double x : v) ASSERT_EQ(x, 1.0) << name;
    } else if (name.ends_with(".bias")) {
      for (double x : v) ASSERT_EQ(x, 0.0) << name;
    } else {
      const Moments m = momentsOf(v);
      const double expected = name.ends_with("c_proj.weight") ? projStd : 0.02;
      // Standard errors: mean ~ sd/sqrt(n), sd ~ sd/sqrt(2n); n >= 4096 here.
      EXPECT_NEAR(m.mean, 0.0, 5 * expected / std::sqrt(double(v.size()))) << name;
      EXPECT_NEAR(m.stddev, expected, 5 * expected / std::sqrt(2.0 * double(v.size()))) << name;
    }
  }
}

// The generator's first draws, pinned: the same on every compiler and platform (no
// std::normal_distribution, no libm). A change here changes every default model's output.
TEST(Gpt2Init, NormalStreamIsPinned) {
  NormalStream s(1337, 0);
  const double expected[] = {0x1.5df9fac0f5a4ep-3, 0x1.c43207008d27fp+0, -0x1.23cfaf6bd5635p-3,
                             -0x1.cb21a2166554ep+0, 0x1.0a85c0d4d3c8bp+0, 0x1.1213e97b902c9p+0};
  for (double e : expected) EXPECT_EQ(s.normal(), e);
  NormalStream u(1, 2);
  const double uniform = u.uniform();
  EXPECT_GE(uniform, 0.0);
  EXPECT_LT(uniform, 1.0);
}

// Tensor k's chunk j draws from stream (seed, k * 2^32 + j) (init.hpp): wte's first values are
// 0.02 times the pinned draws above; wpe's first chunk and wte's second start their own streams.
TEST(Gpt2Init, TensorsDrawFromTheirOwnStreams) {
  const HostWeights w = initialWeights(kGpt2Tiny, 1337);
  NormalStream wte0(1337, 0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w.tensors[0].values[i], 0.02 * wte0.normal());
  NormalStream wte1(1337, 1);
  EXPECT_EQ(w.tensors[0].values[kInitChunk], 0.02 * wte1.normal());
  NormalStream wpe0(1337, std::uint64_t{1} << 32);
  EXPECT_EQ(w.tensors[1].values[0], 0.02 * wpe0.normal());
}

TEST(Gpt2Init, NormalStreamMoments) {
  NormalStream s(42, 7);
  std::vector<Scalar> v(200000);
  for (auto& x : v) x = s.normal();
  const Moments m = momentsOf(v);
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.stddev, 1.0, 0.01);
}

}  // namespace
}  // namespace gpt2
