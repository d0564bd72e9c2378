// Element-wise bodies over a tensor four at a time where aligned (AdamW, GELU, the non-finite
// check), one tensor a launch or a list of them in one.
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

// A list of up to Count bodies in one launch, passed as the kernel's parameter: body i's blocks are
// [firstBlock[i], firstBlock[i + 1]), each thread about Groups groups of four. A GPT-2 step's 148
// to 580 tensors take a few launches instead of one each, and the small ones (biases, LayerNorm
// gains: a few µs each, mostly waiting for their launch) ride along with the large ones. Each
// element is body's, so the bits are those of one launch a tensor.
template <class Body, int Count>
struct BodyList {
  Body body[Count];
  osprey::Index n[Count];
  unsigned firstBlock[Count + 1];
  bool fours[Count];
  int count;
};
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)
template <class Body, int Count>
__global__ void __launch_bounds__(256) bodyListKernel(BodyList<Body, Count> list) {
  const unsigned block = blockIdx.x;
  int i = 0;
  while (i + 1 < list.count && block >= list.firstBlock[i + 1]) ++i;
  const osprey::Index blocks = list.firstBlock[i + 1] - list.firstBlock[i];
  eachByFours(list.body[i], list.n[i], list.fours[i],
              static_cast<osprey::Index>(block - list.firstBlock[i]) * blockDim.x + threadIdx.x, blocks * blockDim.x);
}
}  // namespace

// Every body over its sizes[i] elements, Count bodies a launch (BodyList: within a kernel's 4 KB
// of parameters), Groups groups of four a thread.
template <int Count, int Groups, class Body>
cudaError_t eachBodyListed(cudaStream_t stream, const std::vector<Body>& bodies, const std::vector<osprey::Index>& sizes) {
  static_assert(sizeof(BodyList<Body, Count>) <= 4000, "a kernel's parameters hold 4 KB");
  constexpr osprey::Index kThreads = 256, kMostBlocks = 1 << 16;  // a tensor's blocks: at most 2^16
  for (std::size_t start = 0; start < bodies.size(); start += Count) {
    BodyList<Body, Count> list{};
    list.count = static_cast<int>(std::min<std::size_t>(Count, bodies.size() - start));
    unsigned blocks = 0;
    for (int j = 0; j < list.count; ++j) {
      const Body& body = bodies[start + j];
      const bool fours = body.aligned();
      const osprey::Index n = sizes[start + j], units = fours ? (n + 3) / 4 : n;
      list.body[j] = body, list.n[j] = n, list.fours[j] = fours, list.firstBlock[j] = blocks;
      blocks += static_cast<unsigned>(
          std::clamp<osprey::Index>((units + kThreads * Groups - 1) / (kThreads * Groups), 1, kMostBlocks));
    }
    list.firstBlock[list.count] = blocks;
    bodyListKernel<<<blocks, kThreads, 0, stream>>>(list);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace gpt2::fast_kernels
