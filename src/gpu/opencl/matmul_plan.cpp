#include "matmul_plan.hpp"

#include <algorithm>

#include "matmul_kernels.hpp"

namespace osprey::opencl_detail {

namespace {
constexpr std::size_t kGroupTarget = 64;

std::size_t roundUp(std::size_t n, std::size_t step) { return (n + step - 1) / step * step; }
}  // namespace

MatMulPlan planMatMul(Index rows, Index cols, const MatMulLimits& all) {
  const MatMulKernel kernel = rows < 8 ? MatMulKernel::Strips1 : cols == 1 ? MatMulKernel::Column : MatMulKernel::Strips8;
  const int ry = kernel == MatMulKernel::Strips1 ? 1 : 8;
  const WorkGroupLimits& limits = all[slotOf(kernel)];
  const auto strips = static_cast<std::size_t>((cols + kMatMulStripColumns - 1) / kMatMulStripColumns);
  const auto rowGroups = static_cast<std::size_t>((rows + ry - 1) / ry);
  MatMulPlan plan{kernel, ry, {strips, rowGroups}, {0, 0}};
  if (limits.kernel == 0 || limits.items[0] == 0 || limits.items[1] == 0) return plan;

  const std::size_t most = std::min(kGroupTarget, limits.kernel);
  const std::size_t lx = std::min({strips, most, limits.items[0]});  // every term >= 1
  const std::size_t ly = std::min({rowGroups, most / lx, limits.items[1]});
  plan.local[0] = lx;
  plan.local[1] = ly;
  plan.global[0] = roundUp(strips, lx);
  plan.global[1] = roundUp(rowGroups, ly);
  return plan;
}

}  // namespace osprey::opencl_detail
