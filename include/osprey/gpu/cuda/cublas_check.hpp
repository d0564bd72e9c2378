// OSPREY_CUBLAS_CHECK: OSPREY_CUDA_CHECK's twin for cuBLAS calls (the fast handler's products).
//
//   OSPREY_CUBLAS_CHECK(cublasGemmEx(...), "matMul (768 x 768) * (768 x 4096)");
//
// On failure it returns an Error naming the call, where it is, the cuBLAS status's name and words,
// and the context:
//
//   cublas: matMul (768 x 768) * (768 x 4096): cublasGemmEx(...) failed at include/osprey/gpu/cuda/fast.hpp:90:
//   CUBLAS_STATUS_EXECUTION_FAILED (the GPU program failed to execute)
#pragma once

#include <cublas_v2.h>

#include <string_view>

#include <fmt/format.h>

#include "osprey/gpu/cuda/check.hpp"
#include "osprey/result.hpp"

namespace osprey::cublas {

inline Error failure(cublasStatus_t status, std::string_view call, std::string_view file, int line,
                     std::string_view context = {}) {
  return Error{fmt::format("cublas: {}{}{} failed at {}:{}: {} ({})", context, context.empty() ? "" : ": ", call,
                           cuda::projectPath(file), line, cublasGetStatusName(status),
                           cublasGetStatusString(status))};
}

}  // namespace osprey::cublas

#define OSPREY_CUBLAS_CHECK(call, ...)                                                          \
  do {                                                                                          \
    const cublasStatus_t osprey_cublas_status_ = (call);                                        \
    if (osprey_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                         \
      return ::osprey::cublas::failure(osprey_cublas_status_, #call, __FILE__,                  \
                                       __LINE__ __VA_OPT__(, ) __VA_ARGS__);                    \
  } while (0)
