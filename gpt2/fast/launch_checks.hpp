// Checks that the fast handler's layers and parts share: a raw launch's status, a width a kernel
// takes as an int, and an operand's (rows, cols) shape checked as the reference layers check it.
// nvcc units only.
#pragma once

#include <cuda_runtime.h>

#include <climits>

#include <fmt/format.h>

#include "gpt2/layers/common.hpp"  // checkLength, checkedProduct
#include "osprey/gpu/cuda/check.hpp"

namespace gpt2::fast_detail {

// A raw launch's status, named.
inline osprey::Result<void> launched(const char* kernel) {
  OSPREY_CUDA_CHECK(cudaGetLastError(), kernel);
  return {};
}
// A width a kernel takes as an int.
inline osprey::Result<int> intWidth(const char* layer, osprey::Index width) {
  if (width <= 0 || width > INT_MAX) return osprey::Error{fmt::format("{}: width {} is not in [1, 2^31)", layer, width)};
  return static_cast<int>(width);
}
// b must hold rows × cols elements, checked as the reference layers check their operands.
template <class H>
osprey::Result<void> checkShape(H& h, const Buf<H>& b, osprey::Index rows, osprey::Index cols, const char* layer,
                                const char* tensor) {
  return checkLength(h, b, OSPREY_TRY(checkedProduct(layer, {rows, cols})), layer, tensor);
}

}  // namespace gpt2::fast_detail
