// Asynchronous global -> shared copies (cp.async) and the opt-in to more than 48 KiB of dynamic
// shared memory: what the exact products' kernels (src/gpu/cuda/matmul.cu, narrow_matmul.hpp)
// stage their operands with.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/async_copy.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

// A global -> shared copy of Bytes (8 or 16) that does not block; `valid == false` writes zeros
// and reads nothing (src-size 0), so `src` need only be a mapped address.
template <int Bytes>
__device__ __forceinline__ void copyAsync(double* dst, const double* src, bool valid) {
  static_assert(Bytes == 8 || Bytes == 16, "cp.async copies 8 or 16 bytes here");
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int srcBytes = valid ? Bytes : 0;
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(src), "r"(srcBytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(shared), "l"(src), "r"(srcBytes)
                 : "memory");
  }
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// Kernels that ask for more than 48 KiB of dynamic shared memory must say so, once per device
// (each device loads its own copy of the module).
class SharedMemoryOptIn {
 public:
  template <class Kernel>
  cudaError_t ensure(Kernel* kernel, std::size_t bytes) {
    int device = 0;
    if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) return status;
    const std::uint64_t bit = device < 64 ? std::uint64_t{1} << device : 0;
    if (bit != 0 && (m_done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
    const cudaError_t status =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (status == cudaSuccess) m_done.fetch_or(bit, std::memory_order_acq_rel);
    return status;
  }

 private:
  std::atomic<std::uint64_t> m_done{0};
};

}  // namespace
}  // namespace osprey::cuda_detail
