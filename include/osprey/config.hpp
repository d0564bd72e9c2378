// Osprey configuration: the one kernel-annotation macro and compiler facts the effect needs.
//
// OSPREY_FN marks every function a kernel may call. Under nvcc it expands to
// `__host__ __device__`, so the same source compiles for the host and the device; under a plain
// host compiler it is empty. Model code never writes `__device__` itself.
#pragma once

#if defined(__CUDACC__)
#define OSPREY_FN __host__ __device__
#define OSPREY_INLINE __host__ __device__ __forceinline__
// nvcc's host pass wraps extended `__host__ __device__` lambdas in a type that is not trivially
// copyable; it is still a valid kernel (DESIGN.md §3, CUDA notes).
#define OSPREY_IS_HD_LAMBDA(F) __nv_is_extended_host_device_lambda_closure_type(F)
#else
#define OSPREY_FN
#define OSPREY_INLINE inline __attribute__((always_inline))
#define OSPREY_IS_HD_LAMBDA(F) false
#endif

// True while compiling device code (nvcc's device pass); false on every host pass.
#if defined(__CUDA_ARCH__)
#define OSPREY_DEVICE_PASS 1
#else
#define OSPREY_DEVICE_PASS 0
#endif

// Unroll the next loop fully in device code, so a small array it fills stays in registers (a GPU
// thread cannot index registers at run time; a loop left rolled spills the array to memory). Host
// compilers keep their own judgement.
#if defined(__CUDA_ARCH__)
#define OSPREY_UNROLL _Pragma("unroll")
#else
#define OSPREY_UNROLL
#endif

#include <cstdint>

namespace osprey {
// The element type of every buffer: the exact contract is stated in float64.
using Scalar = double;
// Element counts and positions.
using Index = std::int64_t;
}  // namespace osprey
