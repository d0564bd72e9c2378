// Element-wise bodies over a tensor four at a time where aligned (AdamW, GELU).
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/by_fours.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// body over n elements from `first`, `stride` apart: four at a time where every tensor is aligned
// (then the rest one by one), else one by one.
template <class Body>
__device__ __forceinline__ void eachByFours(const Body& body, osprey::Index n, bool byFours, osprey::Index first,
                                            osprey::Index stride) {
  const osprey::Index groups = byFours ? n / 4 : 0;
  for (osprey::Index q = first; q < groups; q += stride) body.four(q);
  for (osprey::Index i = 4 * groups + first; i < n; i += stride) body(i);
}

// body over n elements (AdamW, GELU): a thread per group, a grid's worth of groups at a time.
template <class Body>
__global__ void __launch_bounds__(256) byFoursKernel(Body body, osprey::Index n, bool byFours) {
  eachByFours(body, n, byFours, static_cast<osprey::Index>(blockIdx.x) * blockDim.x + threadIdx.x,
              static_cast<osprey::Index>(gridDim.x) * blockDim.x);
}

}  // namespace gpt2::fast_kernels
