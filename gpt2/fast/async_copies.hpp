// Asynchronous copies from global into shared memory (cp.async, sm_80 and later), for the kernels
// that stage their operands there (flash attention's tiles, the cross-entropy's rows): a thread
// issues its copies, commits them as a group and later waits for the groups it needs, so its
// copies are all in flight at once instead of one load waited on at a time.
#pragma once

#include <cuda_runtime.h>

namespace gpt2::fast_kernels {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// 16 bytes (zeros where `in` is false), or 4.
__device__ __forceinline__ void copy16(void* dst, const void* src, bool in) {
  const auto to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src), "r"(in ? 16 : 0) : "memory");
}
__device__ __forceinline__ void copy4(void* dst, const void* src) {
  const auto to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to), "l"(src) : "memory");
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most `pending` of this thread's committed groups are still arriving.
template <int pending>
__device__ __forceinline__ void awaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

}  // namespace
}  // namespace gpt2::fast_kernels
