// The opencl device's product (src/gpu/opencl/matmul_kernels.hpp) on the shapes its strips of
// 8 rows x 8 columns (1 row for short products, 1 column for one-column ones) make awkward, against lists bit for bit: rows, columns and depth around the
// strip's edges, depth 0, one row, one column, GPT-2's 50257-column and 50257-row products, and
// chains whose bits a padded or reordered step would change. Then the launch plan
// (src/gpu/opencl/matmul_plan.hpp) on devices with small work-group limits.
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "src/gpu/opencl/matmul_plan.hpp"

namespace osprey::testing {
namespace {

std::vector<Scalar> productOn(auto& h, const std::vector<Scalar>& a, const std::vector<Scalar>& b, Index rows,
                              Index inner, Index cols) {
  auto da = h.fromList(a);
  auto db = h.fromList(b);
  if (!da.ok() || !db.ok()) throw std::runtime_error("fromList failed");
  auto c = h.matMul(*da, *db, rows, inner, cols);
  if (!c.ok()) throw std::runtime_error(c.error().message);
  return readAll(h, *c);
}

void expectListsBits(GpuOpenCl& h, const std::vector<Scalar>& a, const std::vector<Scalar>& b, Index rows,
                     Index inner, Index cols) {
  SCOPED_TRACE(::testing::Message() << rows << "x" << inner << "x" << cols);
  Lists lists;
  EXPECT_SAME_BITS(productOn(h, a, b, rows, inner, cols), productOn(lists, a, b, rows, inner, cols));
}

TEST(OpenClMatMul, StripEdgesAreListsBitForBit) {
  auto h = makeHandler<GpuOpenCl>();
  std::uint64_t seed = 100;
  for (Index rows : {1, 2, 7, 8, 9, 15, 16, 17, 65})
    for (Index cols : {1, 5, 7, 8, 9, 16, 17, 63})
      for (Index inner : {0, 1, 7, 16, 17}) {
        const auto a = randomValues(static_cast<std::size_t>(rows * inner), seed++);
        const auto b = randomValues(static_cast<std::size_t>(inner * cols), seed++);
        expectListsBits(h, a, b, rows, inner, cols);
      }
}

// Decoding's one-row products and the lm head's: 50257 columns (6282 full strips and one of 1),
// and 50257 rows by a few columns (the tied head's product with the activations transposed).
TEST(OpenClMatMul, GptTwoVocabularyShapesAreListsBitForBit) {
  auto h = makeHandler<GpuOpenCl>();
  expectListsBits(h, randomValues(768, 1), randomValues(768 * 50257, 2), 1, 768, 50257);
  expectListsBits(h, randomValues(3 * 64, 3), randomValues(64 * 50257, 4), 3, 64, 50257);
  expectListsBits(h, randomValues(50257 * 64, 5), randomValues(64 * 5, 6), 50257, 64, 5);
  expectListsBits(h, randomValues(50257 * 64, 7), randomValues(64, 8), 50257, 64, 1);
}

// Every term's exact product is a negative number too small for a double: each step rounds to
// -0.0, so every chain of one or more steps ends at -0.0 and the empty chain at +0.0. A step past
// the last k, fma(0, 0, -0.0) = +0.0, or a chain started from anything but +0.0, shows here.
TEST(OpenClMatMul, ChainsEndingAtNegativeZeroKeepTheirSign) {
  auto h = makeHandler<GpuOpenCl>();
  struct Shape {
    Index rows, cols;
  };
  for (const Shape shape : {Shape{9, 11}, Shape{3, 11}, Shape{9, 1}}) {
    const auto [rows, cols] = shape;
    for (Index inner : {0, 1, 9, 17}) {
      const std::vector<Scalar> a(static_cast<std::size_t>(rows * inner), -1e-200);
      const std::vector<Scalar> b(static_cast<std::size_t>(inner * cols), 1e-200);
      const std::vector<Scalar> want(static_cast<std::size_t>(rows * cols), inner == 0 ? 0.0 : -0.0);
      SCOPED_TRACE(::testing::Message() << rows << "x" << inner << "x" << cols);
      EXPECT_SAME_BITS(productOn(h, a, b, rows, inner, cols), want);
      expectListsBits(h, a, b, rows, inner, cols);
    }
  }
}

// Signed zeros, subnormal operands and products, and sums that cancel: each term rounded once in
// k order, as lists does. (No NaN or infinity: a device's own NaN bits are not the contract's.)
TEST(OpenClMatMul, SignedZerosSubnormalsAndCancellationAreListsBitForBit) {
  auto h = makeHandler<GpuOpenCl>();
  const Index rows = 13, inner = 29, cols = 19;
  auto a = randomValues(static_cast<std::size_t>(rows * inner), 41, -1e3, 1e3);
  auto b = randomValues(static_cast<std::size_t>(inner * cols), 42, -1e3, 1e3);
  for (std::size_t i = 0; i < a.size(); i += 5) a[i] = -0.0;
  for (std::size_t i = 2; i < a.size(); i += 7) a[i] = std::numeric_limits<Scalar>::denorm_min() * (i % 3 + 1);
  for (std::size_t i = 1; i < b.size(); i += 6) b[i] = -b[i - 1];
  for (std::size_t i = 3; i < b.size(); i += 11) b[i] = 1e-310;
  expectListsBits(h, a, b, rows, inner, cols);
}

// ---- the launch plan ------------------------------------------------------------------------

using opencl_detail::MatMulKernel;
using opencl_detail::MatMulLimits;
using opencl_detail::MatMulPlan;
using opencl_detail::planMatMul;
using opencl_detail::WorkGroupLimits;

// Every output is some work item's, and the work-group fits what the device takes.
void expectPlanFits(Index rows, Index cols, const WorkGroupLimits& limits) {
  SCOPED_TRACE(::testing::Message() << rows << " rows x " << cols << " cols, kernel limit " << limits.kernel);
  const MatMulPlan plan = planMatMul(rows, cols, MatMulLimits{limits, limits, limits});
  EXPECT_EQ(plan.kernel, rows < 8 ? MatMulKernel::Strips1 : cols == 1 ? MatMulKernel::Column : MatMulKernel::Strips8);
  EXPECT_EQ(plan.rowsPerItem, rows >= 8 ? 8 : 1);
  EXPECT_GE(plan.global[0] * 8, static_cast<std::size_t>(cols));
  EXPECT_GE(plan.global[1] * static_cast<std::size_t>(plan.rowsPerItem), static_cast<std::size_t>(rows));
  if (plan.local[0] == 0) {
    EXPECT_EQ(plan.local[1], 0u);
    return;
  }
  EXPECT_EQ(plan.global[0] % plan.local[0], 0u);
  EXPECT_EQ(plan.global[1] % plan.local[1], 0u);
  EXPECT_LE(plan.local[0] * plan.local[1], limits.kernel);
  EXPECT_LE(plan.local[0], limits.items[0]);
  EXPECT_LE(plan.local[1], limits.items[1]);
  // No work-group lies wholly past the outputs.
  EXPECT_LT(plan.global[0] - plan.local[0], static_cast<std::size_t>((cols + 7) / 8));
  EXPECT_LT(plan.global[1] - plan.local[1],
            static_cast<std::size_t>((rows + plan.rowsPerItem - 1) / plan.rowsPerItem));
}

TEST(OpenClMatMulPlan, FitsEveryShapeWithinTheDevicesWorkGroupLimits) {
  const WorkGroupLimits devices[] = {
      {4096, {4096, 4096}},  // PoCL
      {1024, {1024, 1024}},  // a GPU
      {256, {1024, 1024}},   // a kernel whose registers allow fewer
      {48, {32, 1}},         // a device of 32 by 1
      {1, {1, 1}},           // one work item a group
  };
  for (const auto& limits : devices)
    for (Index rows : {1, 7, 8, 9, 64, 255, 50257})
      for (Index cols : {1, 5, 8, 9, 64, 2304, 50257}) expectPlanFits(rows, cols, limits);
}

TEST(OpenClMatMulPlan, LeavesTheGroupToTheDeviceWhenItsLimitsAreUnknown) {
  const MatMulPlan plan = planMatMul(50257, 5, MatMulLimits{});
  EXPECT_EQ(plan.local[0], 0u);
  EXPECT_EQ(plan.local[1], 0u);
  EXPECT_EQ(plan.global[0], 1u);
  EXPECT_EQ(plan.global[1], 6283u);
}

TEST(OpenClMatMulPlan, GroupsSixtyFourWorkItemsColumnsFirst) {
  const WorkGroupLimits g{1024, {1024, 1024}};
  const MatMulLimits gpu{g, g, g};
  const MatMulPlan wide = planMatMul(256, 2304, gpu);  // 288 strips x 32 row groups
  EXPECT_EQ(wide.local[0], 64u);
  EXPECT_EQ(wide.local[1], 1u);
  EXPECT_EQ(wide.global[0], 320u);
  const MatMulPlan narrow = planMatMul(50257, 5, gpu);  // 1 strip x 6283 row groups
  EXPECT_EQ(narrow.local[0], 1u);
  EXPECT_EQ(narrow.local[1], 64u);
  EXPECT_EQ(narrow.global[1], 6336u);
}

}  // namespace
}  // namespace osprey::testing
