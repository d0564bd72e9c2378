// Hopper's warpgroup products (wgmma, sm_90a): four warps issue one 64-row product together and
// the tensor cores read its B operand straight from shared memory, with no fragment loads through
// the registers; the product runs asynchronously until the warpgroup waits for it. nvcc units only.
//
// The instructions assemble only for sm_90a: a kernel calls these where __CUDA_ARCH_FEAT_SM90_ALL
// is defined (and traps elsewhere), and the host asks wgmmaReady() before launching it.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/wgmma.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include <cstdint>

namespace gpt2::fast_kernels {

// Whether this build holds sm_90a code (CMake defines OSPREY_CUDA_WGMMA for an arch list naming
// 90a) and the current device runs it (compute capability 9.0, an H100 or H200).
inline bool wgmmaReady() {
#if defined(OSPREY_CUDA_WGMMA)
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) return false;
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

namespace wgmma {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// A shared-memory operand's descriptor (PTX ISA, "Matrix Descriptor"), for tiles whose rows are
// 128 bytes (64 bf16) stored with the 128-byte swizzle: 16-byte chunk j of row r at j XOR (r mod 8),
// the tile starting on a 1024-byte boundary (Bf16Tiles::at is that layout). Fields: the start
// address / 16 (bits 0–13), the leading byte offset / 16 (16–29), the stride byte offset / 16
// (32–45), the swizzle mode (62–63; 1 = 128 bytes).
//   K-major operand (its rows run along the product's k): the stride is 1024, from one 8-row
//     group of the tile to the next; the leading offset is unused (the 16 k of an instruction lie
//     in one row). k-step ks starts 32·ks bytes into the row.
//   MN-major operand (rows run along k, the 64 columns along n): the stride is 1024, from one
//     group of 8 k-rows to the next; the leading offset would step to the next 64 columns (none).
//     k-step ks starts at row 16·ks.
__device__ __forceinline__ std::uint64_t descriptor(const void* shared) {
  const auto at = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  constexpr std::uint64_t kStride = 1024 >> 4, kLeading = 1, kSwizzle128 = 1;
  return static_cast<std::uint64_t>((at & 0x3FFFF) >> 4) | (kLeading << 16) | (kStride << 32) | (kSwizzle128 << 62);
}

// The first 1024-byte boundary at or after `shared` (dynamic shared memory, given 1024 bytes more
// than its tiles take), where a kernel's tiles start so that their 8-row groups line up with the
// 128-byte swizzle's pattern.
__device__ __forceinline__ unsigned char* swizzleAligned(unsigned char* shared) {
  const auto at = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  return shared + ((1024u - (at & 1023u)) & 1023u);
}

// Orders this thread's earlier register writes (accumulators, A fragments) and shared-memory
// reads before the warpgroup's next products.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the products issued since the last commit into a group.
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most `pending` committed groups are still running.
template <int pending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}
// Makes this thread's ordinary writes to shared memory (stores, cp.async) visible to the products'
// operand reads, which go through the async proxy; each writer fences before the barrier that
// hands the tile over.
__device__ __forceinline__ void sharedWritesVisible() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Pins an accumulator's registers here in the instruction order, so that the compiler moves no
// read of them above the wait for the products that write them.
__device__ __forceinline__ void pin(float (&d)[8][4]) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[nt][e])::"memory");
}

// d (64 × 64, f32) = (accumulate ? d : 0) + A · B over one k-step of 16: A from the registers (the
// lane's a fragment, laid out as mma.m16n8k16's for its warp's 16 rows), B in shared memory (`b`,
// a descriptor), read as MN-major where kTransposeB. d[nt][e] is the warp's block nt laid out as
// mma.m16n8k16's d: rows 16·(warp mod 4) + lane / 4 (+ 8 for e ≥ 2), columns 8nt + 2·(lane mod 4)
// (+ 1 for odd e).
template <int kTransposeB>
__device__ __forceinline__ void product64(float (&d)[8][4], const std::uint32_t (&a)[4], std::uint64_t b,
                                          bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kTransposeB), "r"(accumulate ? 1 : 0));
}

// d (64 × 64, f32) = (accumulate ? d : 0) + A · B over one k-step of 16, A and B both in shared
// memory (descriptors `a` and `b`), A K-major, B read as MN-major where kTransposeB.
template <int kTransposeB>
__device__ __forceinline__ void product64Shared(float (&d)[8][4], std::uint64_t a, std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %35, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, %34;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(a), "l"(b), "n"(kTransposeB), "r"(accumulate ? 1 : 0));
}

}  // namespace
}  // namespace wgmma
}  // namespace gpt2::fast_kernels
