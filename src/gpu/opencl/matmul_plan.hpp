// How the opencl device launches a product (matmul_kernels.hpp): which kernel, and its global and
// work-group sizes, from the shape and what the device takes. Kept apart from the launch so that
// it can be checked without a device (tests/opencl/matmul_opencl_test.cpp).
#pragma once

#include <array>
#include <cstddef>

#include "osprey/config.hpp"

namespace osprey::opencl_detail {

// What one kernel may be launched with on the device: CL_KERNEL_WORK_GROUP_SIZE (the kernel's own
// limit, which registers can bring below the device's) and CL_DEVICE_MAX_WORK_ITEM_SIZES[0..1].
// 0 where a query failed: then the device picks the work-group size.
struct WorkGroupLimits {
  std::size_t kernel = 0;
  std::size_t items[2] = {0, 0};
};

// The product's kernels, in the order of kMatMulKernelNames (matmul_kernels.hpp).
enum class MatMulKernel { Strips8, Strips1, Column };
inline constexpr std::size_t kMatMulKernelCount = 3;
constexpr std::size_t slotOf(MatMulKernel k) { return static_cast<std::size_t>(k); }

// Each kernel's limits on the device, indexed by slotOf(kernel).
using MatMulLimits = std::array<WorkGroupLimits, kMatMulKernelCount>;

struct MatMulPlan {
  MatMulKernel kernel;
  int rowsPerItem;          // 8, or 1 for Strips1
  std::size_t global[2];    // strips along columns, along rows; multiples of local
  std::size_t local[2];     // the work-group; {0, 0}: the device picks (a null local size)
};

// rows, cols > 0. Fewer than 8 rows: Strips1; one column: Column; otherwise Strips8. About 64
// work items a group, columns first (neighbouring work items read neighbouring columns of b),
// within the limits of the kernel chosen.
MatMulPlan planMatMul(Index rows, Index cols, const MatMulLimits& limits);

}  // namespace osprey::opencl_detail
