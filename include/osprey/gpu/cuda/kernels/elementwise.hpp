// The element-wise kernels: forEach's grid-stride loop, indexOf's first hit, and the grid they take.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/elementwise.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/launch_faults.hpp"
#include "osprey/view.hpp"

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

// body(i) for every i in [0, n): a grid-stride loop, so any n fits any grid.
template <class Body>
__global__ void __launch_bounds__(kThreadsPerBlock) forEachKernel(Index n, Body body, unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  // In the device pass the closure is the lambda's own type (the host pass sees nvcc's wrapper),
  // so this is where an owning capture (a vector, a string, a buffer handle) is caught.
  static_assert(std::is_trivially_copyable_v<Body>,
                "a kernel closure must be trivially copyable: capture Views and scalars by value, "
                "never owning handles (vectors, strings, buffers)");
#endif
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    body(i);
  stampFault(launch);
}

// Every thread walks its grid-stride indices in ascending order and stops at its first hit; the
// smallest hit over all threads wins through atomicMin. *best starts at n ("not found").
template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock) indexOfKernel(ViewOf<T> v, Scalar x, long long* best) {
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < v.n; i += stride) {
    if (static_cast<Scalar>(v.data[i]) == x) {
      atomicMin(best, static_cast<long long>(i));
      return;
    }
  }
}

// Blocks for a grid-stride launch over n elements: enough to fill the GPU, never more than n needs.
inline unsigned blocksFor(Index n, int multiprocessors) {
  const Index needed = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const Index filling = static_cast<Index>(multiprocessors) * 32;
  return static_cast<unsigned>(needed < filling ? needed : filling);
}

}  // namespace
}  // namespace osprey::cuda_detail
