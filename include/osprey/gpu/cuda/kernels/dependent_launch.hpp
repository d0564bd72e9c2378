// Programmatic dependent launch (sm_90): a kernel launched by launchOverlapped may start while the
// kernel before it on the stream is still running. It lets its own successor start at once
// (startDependents), does what needs nothing from earlier kernels (loading weights), and waits for
// every earlier kernel to finish and its writes to be visible (awaitEarlierKernels) before it reads
// an activation or writes anything. Launched the ordinary way, both are no-ops. The fast decoding
// kernels (gpt2/fast/decode_kernels.hpp) and the exact one-row products (row_dmma.hpp) use it.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/dependent_launch.hpp is compiled by nvcc only (a .cu file)"
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
// it (the kernel awaits it: awaitEarlierKernels) on a stream of the caller's own. The legacy
// default stream launches the ordinary way.
template <class... Params, class... Args>
cudaError_t launchOverlapped(dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream, void (*kernel)(Params...),
                             Args&&... args) {
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = stream ? &overlap : nullptr;
  config.numAttrs = stream ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace osprey::cuda_detail
