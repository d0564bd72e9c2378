// The special-function unit's approximations, for the fast kernels' exponentials and reciprocals
// (flash attention's softmax, the cross-entropy, GELU's gate): one instruction each, where exp2f
// and division add instructions around them for subnormals and rounding.
#pragma once

namespace gpt2::fast_kernels {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// 2^x (ex2.approx.ftz: relative error about 2^-22, subnormal results flushed to 0, 2^-inf = 0).
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// 1/x (rcp.approx.ftz: within an ulp or so; 1/inf = 0, subnormal inputs flushed to 0).
__device__ __forceinline__ float fastReciprocal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace
}  // namespace gpt2::fast_kernels
