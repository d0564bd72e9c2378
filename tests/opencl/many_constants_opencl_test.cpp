// A kernel that captures more numbers than the device's argument space holds (1024 bytes on PoCL,
// the least OpenCL allows) still runs, its constants passed in a buffer, with the host's bits.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "osprey/trace/opencl_source.hpp"

namespace osprey::testing {
namespace {

// 300 captured weights: 2,400 bytes of constants.
struct ManyWeights {
  View x;
  Scalar w[300];
  template <class I>
  auto operator()(I i) const {
    decltype(x[i]) acc = 0.0;
    for (const Scalar weight : w) acc = acc + x[i] * weight;
    return acc;
  }
};

TEST(OpenClConstants, MoreThanTheArgumentSpaceStillRunWithTheHostsBits) {
  auto h = makeHandler<GpuOpenCl>();
  const std::vector<Scalar> xs = randomValues(1000, 11);
  auto x = h.fromList(xs);
  ASSERT_TRUE(x.ok()) << x.error().message;
  ManyWeights kernel{x->view(), {}};
  for (int k = 0; k < 300; ++k) kernel.w[k] = 0.5 + k * 0.01;
  auto y = h.build(static_cast<Index>(xs.size()), kernel);
  ASSERT_TRUE(y.ok()) << y.error().message;
  std::vector<Scalar> want;
  const ManyWeights onHost{View{xs.data(), static_cast<Index>(xs.size())}, {}};
  ManyWeights hostKernel = onHost;
  std::memcpy(hostKernel.w, kernel.w, sizeof kernel.w);
  for (Index i = 0; i < static_cast<Index>(xs.size()); ++i) want.push_back(hostKernel(i));
  EXPECT_SAME_BITS(readAll(h, *y), want);
}

TEST(OpenClConstants, TheBufferFormReadsEachConstantAtTheKernelsStart) {
  trace::Graph g;
  int result = -1;
  {
    trace::Recording recording(g);
    const trace::Idx i{trace::detail::FromNode{}, g.param()};
    result = (trace::toScalarTraced(i) * 2.5 + 1.0).id;
  }
  const std::string text = trace::openClSource(g, result, trace::Shape::EachIndex, trace::Constants::Buffer);
  EXPECT_NE(text.find("__global const ulong* constants"), std::string::npos) << text;
  EXPECT_NE(text.find("const double k0 = as_double(constants[0]);"), std::string::npos) << text;
}

}  // namespace
}  // namespace osprey::testing
