// AdamW over a step's tensors, a few launches for all of them.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/adamw.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpt2/fast/kernels/by_fours.hpp"
#include "gpt2/fast/kernels/row_walks.hpp"
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// AdamW (layers/adamw.hpp), one pass over the tensor:
//   m' = m + (1 - beta1)·(g - m);  v' = v·beta2 + ((1 - beta2)·g)·g
//   p' = p·keep + (stepSize·m') / (sqrt(v') / sqrt(bc2) + eps)     (keep = 1 - lr·wd where decayed)
// stepSize = -lr / bc1 and the bias corrections are computed once, on the host, as the reference does.
// Where `twin` is given, the new parameter's bf16 rounding is written there too: the next step's
// products read the weights' twins.
struct AdamWBody {
  float *param, *m, *v;
  const float *oldParam, *grad, *oldM, *oldV;
  float beta1, beta2, keep, stepSize, bc2Sqrt, eps;
  __nv_bfloat16* twin = nullptr;
  // One element's update: the new (param, m, v) from the old ones and the gradient.
  __device__ __forceinline__ float3 update(float p, float g, float mOld, float vOld) const {
    const float m1 = mOld + (1.0f - beta1) * (g - mOld);
    const float v1 = vOld * beta2 + ((1.0f - beta2) * g) * g;
    return {p * keep + (stepSize * m1) / (sqrtf(v1) / bc2Sqrt + eps), m1, v1};
  }
  __device__ __forceinline__ void operator()(osprey::Index i) const {
    const float3 r = update(oldParam[i], grad[i], oldM[i], oldV[i]);
    param[i] = r.x, m[i] = r.y, v[i] = r.z;
    if (twin) twin[i] = __float2bfloat16_rn(r.x);
  }
  // Elements 4q .. 4q + 3, each tensor read and written 16 bytes at a time (all of them aligned).
  __device__ __forceinline__ void four(osprey::Index q) const {
    const float4 p = reinterpret_cast<const float4*>(oldParam)[q], g = reinterpret_cast<const float4*>(grad)[q];
    const float4 m0 = reinterpret_cast<const float4*>(oldM)[q], v0 = reinterpret_cast<const float4*>(oldV)[q];
    const float3 a = update(p.x, g.x, m0.x, v0.x), b = update(p.y, g.y, m0.y, v0.y);
    const float3 c = update(p.z, g.z, m0.z, v0.z), d = update(p.w, g.w, m0.w, v0.w);
    const float4 updated = make_float4(a.x, b.x, c.x, d.x);
    reinterpret_cast<float4*>(param)[q] = updated;
    reinterpret_cast<float4*>(m)[q] = make_float4(a.y, b.y, c.y, d.y);
    reinterpret_cast<float4*>(v)[q] = make_float4(a.z, b.z, c.z, d.z);
    if (twin) storeBf16Four(twin + 4 * q, updated);
  }
  bool aligned() const {
    for (const void* p : {static_cast<const void*>(param), static_cast<const void*>(m), static_cast<const void*>(v),
                          static_cast<const void*>(oldParam), static_cast<const void*>(grad),
                          static_cast<const void*>(oldM), static_cast<const void*>(oldV)})
      if (!alignedTo(p, 16)) return false;
    return alignedTo(twin, 8);
  }
};


// AdamW over a step's tensors, kAdamWTensors a launch (eachBodyListed).
constexpr int kAdamWTensors = 24;  // 24 bodies of 88 bytes: within a kernel's 4 KB of parameters
constexpr int kAdamWGroups = 4;
inline cudaError_t adamwTensors(cudaStream_t stream, const std::vector<AdamWBody>& bodies,
                                const std::vector<osprey::Index>& sizes) {
  return eachBodyListed<kAdamWTensors, kAdamWGroups>(stream, bodies, sizes);
}

}  // namespace gpt2::fast_kernels
