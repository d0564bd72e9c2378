// Programmatic dependent launch (sm_90): a kernel launched by launchOverlapped may start while the
// kernel before it on the stream is still running. It lets its own successor start at once
// (startDependents), does what needs nothing from earlier kernels (loading weights), and waits for
// every earlier kernel to finish and its writes to be visible (awaitEarlierKernels) before it reads
// an activation or writes anything. Launched the ordinary way, both are no-ops. Every block of such
// a kernel must wait before it ends (a later kernel's wait then covers every earlier one).
// The fast handler's decoding kernels and the exact handler's recorded decoding step use it.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/programmatic_launch.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace osprey::cuda_detail {

__device__ __forceinline__ void startDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void awaitEarlierKernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, shared, stream>>>(args...), allowed to overlap the end of the kernel before
// it when `overlap` (the kernel awaits it: awaitEarlierKernels) on a stream of the caller's own.
// The legacy default stream launches the ordinary way.
template <class... Params, class... Args>
cudaError_t launchOverlapped(bool overlap, dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream,
                             void (*kernel)(Params...), Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  const bool attached = overlap && stream != nullptr;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = attached ? &attribute : nullptr;
  config.numAttrs = attached ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace osprey::cuda_detail
