// The one-thread left fold over a whole buffer (reduce), fed through shared memory.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/fold.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/launch_faults.hpp"
#include "osprey/view.hpp"

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

// The left fold: combine(...combine(seed, v[0])..., v[n-1]). combine is arbitrary (not
// associative, not commutative: float addition is not associative), so the contract fixes the
// order, and one thread applies it. That thread would spend most of its time waiting on memory if
// it loaded the elements itself (each load a few hundred cycles, and one thread keeps few in
// flight), so the whole block streams chunks of the input into shared memory with asynchronous
// copies, one chunk ahead, while thread 0 folds the chunk before it from shared memory.
constexpr int kFoldThreads = 256;
constexpr int kFoldChunk = 2048;  // elements per chunk; two chunks = 32 KiB of shared memory

template <class T>
__device__ __forceinline__ void copyElementAsync(T* dst, const T* src) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp.async copies 4, 8 or 16 bytes");
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(shared), "l"(src), "n"(sizeof(T)) : "memory");
}

template <class T, class C>
__global__ void __launch_bounds__(kFoldThreads)
    foldKernel(ViewOf<T> v, Scalar seed, C combine, Scalar* out, unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  static_assert(std::is_trivially_copyable_v<C>,
                "a combine closure must be trivially copyable: capture Views and scalars by value, "
                "never owning handles (vectors, strings, buffers)");
#endif
  __shared__ T chunk[2][kFoldChunk];
  const int tid = static_cast<int>(threadIdx.x);
  const Index chunks = (v.n + kFoldChunk - 1) / kFoldChunk;
  // Queue the copies of chunk c into buffer c % 2 (one commit group per call, possibly empty).
  auto fetch = [&](Index c) {
    if (c < chunks) {
      const Index first = c * kFoldChunk;
      const Index count = v.n - first < kFoldChunk ? v.n - first : kFoldChunk;
      for (Index e = tid; e < count; e += kFoldThreads) copyElementAsync(&chunk[c % 2][e], v.data + first + e);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  Scalar acc = seed;
  fetch(0);
  for (Index c = 0; c < chunks; ++c) {
    fetch(c + 1);  // buffer (c + 1) % 2 was left by thread 0 before the barrier ending step c - 1
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // chunk c has landed (for this thread)
    __syncthreads();                                         // ... and for every thread
    if (tid == 0) {
      const T* values = chunk[c % 2];
      const Index first = c * kFoldChunk;
      const int count = static_cast<int>(v.n - first < kFoldChunk ? v.n - first : kFoldChunk);
#pragma unroll 8
      for (int e = 0; e < count; ++e) acc = combine(acc, static_cast<Scalar>(values[e]));
    }
    __syncthreads();  // thread 0 is done with buffer c % 2 before it is refilled
  }
  if (tid == 0) *out = acc;
  stampFault(launch);
}

}  // namespace
}  // namespace osprey::cuda_detail
