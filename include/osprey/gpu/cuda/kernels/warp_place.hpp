// Where the calling warp runs: its %warpid (which the PTX manual calls volatile; on Hopper its value
// modulo 4 is the multiprocessor quarter whose tensor core the warp issues to:
// tools/profile/quarter_probe.cu) and its multiprocessor's %smid. Read by the row products to choose
// their computing warp, by the block trace and by the probes.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/warp_place.hpp is compiled by nvcc only (a .cu file)"
#endif

namespace osprey::cuda_detail {

__device__ __forceinline__ unsigned warpSlot() {
  unsigned slot;
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(slot));
  return slot;
}

__device__ __forceinline__ unsigned multiprocessorId() {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}

}  // namespace osprey::cuda_detail
