// The tracer and its OpenCL C (osprey/trace/): what a traced kernel's program says, checked as
// text, without an OpenCL device (tests/opencl/ runs the programs).
#include <array>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "osprey/kernel_types.hpp"
#include "osprey/math/fma.hpp"
#include "osprey/math/sqrt.hpp"
#include "osprey/trace/opencl_source.hpp"
#include "osprey/trace/values.hpp"
#include "osprey/view.hpp"

namespace osprey::trace {
namespace {

// The program of kernel(i) for every i, and the graph it came from.
template <class K>
std::pair<std::string, Graph> traceEach(K kernel) {
  Graph g;
  int result = -1;
  {
    Recording recording(g);
    result = Num(kernel(Idx{detail::FromNode{}, g.param()})).id;
  }
  std::string text = openClSource(g, result, Shape::EachIndex);
  return {std::move(text), std::move(g)};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::array<double, 8> memory{};

TEST(OpenClSource, CapturedNumbersAreArgumentsSoOneTextServesEveryCall) {
  const View v{memory.data(), 8};
  const auto scaledBy = [&](double c) { return traceEach([=](Idx i) { return v[i] * c + 1.0; }); };
  const auto [two, g2] = scaledBy(2.0);
  const auto [three, g3] = scaledBy(3.0);
  EXPECT_EQ(two, three) << "the captured number changed the program's text";
  ASSERT_EQ(g2.constants().size(), 2u);
  ASSERT_EQ(g3.constants().size(), 2u);
  EXPECT_FALSE(g2.constants() == g3.constants()) << "the captured number is not among the arguments";
  ASSERT_EQ(g2.views().size(), 1u);
  EXPECT_EQ(g2.views()[0].data, memory.data());
  EXPECT_TRUE(contains(two, "const double k0")) << two;
}

TEST(OpenClSource, EveryProgramKeepsIeeeArithmetic) {
  const View v{memory.data(), 8};
  const auto [text, g] = traceEach([=](Idx i) { return v[i] * v[i] + 1.0; });
  EXPECT_TRUE(contains(text, "#pragma OPENCL FP_CONTRACT OFF")) << text;
  EXPECT_TRUE(contains(text, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable")) << text;
  // a * b + c stays two roundings: no fma the kernel did not write.
  EXPECT_FALSE(contains(text.substr(openClPrelude().size()), "fma(")) << text;
}

TEST(OpenClSource, WrittenFmaAndSqrtAreOneOperationEach) {
  const View v{memory.data(), 8};
  const auto [text, g] = traceEach([=](Idx i) { return math::sqrt(math::fma(v[i], v[i], 1.0)); });
  EXPECT_TRUE(contains(text, "fma(")) << text;
  EXPECT_TRUE(contains(text, "sqrt(")) << text;
}

TEST(OpenClSource, IndexArithmeticIsCheckedOnTheDevice) {
  const View v{memory.data(), 8};
  const auto [text, g] = traceEach([=](Idx i) { return v[(asInt(i) * Int(3) + 1) % Int(8)]; });
  EXPECT_TRUE(contains(text, "osp_mul(")) << text;
  EXPECT_TRUE(contains(text, "osp_add(")) << text;
  EXPECT_TRUE(contains(text, "osp_rem(")) << text;
}

TEST(OpenClSource, LoopsWithTracedBoundsAreLoops) {
  const View v{memory.data(), 8};
  const auto [text, g] = traceEach([=](Idx i) {
    return loop(Num(0.0), Idx(0), i + 1, [&](Idx k, Num acc) { return acc + v[k]; });
  });
  ASSERT_EQ(g.loops().size(), 1u);
  EXPECT_TRUE(contains(text, "for (long j0 = ")) << text;
}

TEST(OpenClSource, WhenEvaluatesOneSide) {
  const View v{memory.data(), 8};
  const auto [text, g] = traceEach([=](Idx i) {
    return when(i < 4, [&] { return v[i]; }, [&] { return v[asInt(i) - 4] * 2.0; });
  });
  ASSERT_EQ(g.branches().size(), 1u);
  EXPECT_TRUE(contains(text, "if (")) << text;
  EXPECT_TRUE(contains(text, "} else {")) << text;
}

TEST(OpenClSource, TracedValuesExistOnlyInsideATrace) {
  EXPECT_THROW(Num{1.0}, std::logic_error);
  Graph g;
  Recording recording(g);
  Graph inner;
  EXPECT_THROW(Recording{inner}, std::logic_error) << "traces do not nest";
}

}  // namespace
}  // namespace osprey::trace
