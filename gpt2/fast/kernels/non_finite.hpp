// Whether a step's new weights hold a NaN or an infinity (train::anyNonFinite), every tensor read
// once in a few launches.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/non_finite.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include <vector>

#include "gpt2/fast/kernels/by_fours.hpp"
#include "gpt2/fast/kernels/row_walks.hpp"  // alignedTo
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// Sets *flag to 1 where an element of x is NaN or infinite: its exponent bits all ones, a test no
// compiler flag about finite maths can fold away. A bad step's elements all write the same 1.
struct NonFiniteBody {
  const float* x;
  float* flag;
  static __device__ __forceinline__ bool bad(float v) {
    return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
  }
  __device__ __forceinline__ void operator()(osprey::Index i) const {
    if (bad(x[i])) atomicExch(flag, 1.0f);
  }
  __device__ __forceinline__ void four(osprey::Index q) const {
    const float4 v = reinterpret_cast<const float4*>(x)[q];
    if (bad(v.x) || bad(v.y) || bad(v.z) || bad(v.w)) atomicExch(flag, 1.0f);
  }
  bool aligned() const { return alignedTo(x, 16); }
};

// 96 bodies of 16 bytes a launch: a 1558M step's 580 tensors in 7.
constexpr int kNonFiniteTensors = 96;
constexpr int kNonFiniteGroups = 8;
inline cudaError_t nonFiniteTensors(cudaStream_t stream, const std::vector<NonFiniteBody>& bodies,
                                    const std::vector<osprey::Index>& sizes) {
  return eachBodyListed<kNonFiniteTensors, kNonFiniteGroups>(stream, bodies, sizes);
}

}  // namespace gpt2::fast_kernels
