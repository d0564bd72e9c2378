// A float buffer's bf16 twin and back: the rounding a bf16 product's operand is made by
// (fast/bf16_twins.hpp), and the floats of a buffer stored as bf16 alone.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/twin_copies.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpt2/fast/kernels/row_walks.hpp"  // alignedTo, storeBf16Four
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

constexpr int kTwinThreads = 256;

namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// out[i] = in[i] rounded to bf16 (nearest even) for i < n, then zeros up to `length`: four
// elements a thread, read as one float4 where in is 16-byte aligned and written as two bf16 pairs.
__global__ void __launch_bounds__(kTwinThreads) bf16Copy(__nv_bfloat16* out, const float* in, osprey::Index n,
                                                         osprey::Index length) {
  const bool aligned = alignedTo(in, 16);
  const osprey::Index step = static_cast<osprey::Index>(gridDim.x) * blockDim.x * 4;
  for (osprey::Index i = (static_cast<osprey::Index>(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < length;
       i += step) {
    float4 q;
    if (aligned && i + 4 <= n) {
      q = __ldcs(reinterpret_cast<const float4*>(in + i));
    } else {
      float v[4];
      for (int k = 0; k < 4; ++k) v[k] = i + k < n ? in[i + k] : 0.0f;
      q = make_float4(v[0], v[1], v[2], v[3]);
    }
    if (i + 4 <= length) {  // out is the start of an allocation: 8-byte aligned at every i
      storeBf16Four(out + i, q);
    } else {
      const float v[4] = {q.x, q.y, q.z, q.w};
      for (int k = 0; i + k < length; ++k) out[i + k] = __float2bfloat16_rn(v[k]);
    }
  }
}

// out[i] = in[i] widened to float, for i < n: the floats of a buffer stored as bf16.
__global__ void __launch_bounds__(kTwinThreads) floatsOfHalves(float* out, const __nv_bfloat16* in,
                                                               osprey::Index n) {
  const osprey::Index step = static_cast<osprey::Index>(gridDim.x) * blockDim.x;
  for (osprey::Index i = static_cast<osprey::Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = __bfloat162float(in[i]);
}

}  // namespace
}  // namespace gpt2::fast_kernels
