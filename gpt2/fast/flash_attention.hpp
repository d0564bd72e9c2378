// The fast handler's causal attention at head size 64 (GPT-2's), flash-style: the (T, T) scores
// of a head are never stored. nvcc units only.
//
// Forward, per (batch, head) and tile of 64 queries, over the key tiles up to the diagonal:
//   s = q·kᵀ / sqrt(hs)                       TF32 tensor-core products, float sums
//   m, l: the running max and Σ exp(s - m)    (online softmax: o and l rescale when m grows)
//   o += exp(s - m) · v;  at the end o /= l, and the row's log-sum-exp (m + log l) is kept.
//   (With bf16 tiles a warp holds two 16-row blocks of queries, a block 128 queries.)
// Backward, from q, k, v, o, dout and that log-sum-exp (p = exp(s - lse) recomputed per tile):
//   Drow = Σ dout ∘ o                         (= Σ_t2 att·datt of the reference)
//   ds   = p ∘ (dout·vᵀ - Drow)
//   dv = Σ pᵀ·dout,  dk = Σ dsᵀ·q / sqrt(hs)  one block per key tile, over the query tiles after it
//   dq = Σ ds·k / sqrt(hs)                    one block per query tile, over the key tiles before it
// Two kernels instead of one with atomic dq updates, so every sum has one fixed order and a step
// gives the same bits each time it runs. With bf16 tiles the keys kernel hands ds (rounded to
// bf16, as its own dk product reads it) to dq's kernel through a scratch, so dq's kernel does one
// product a tile pair; with TF32 tiles it computes s, dp and ds again.
//
// The definitions are attention.hpp's reference; only the arithmetic differs: tensor-core products
// on TF32 or bf16 operands (the handler's kind of product), float softmax with exp2, a different
// grouping of the sums (docs/FAST.md bounds the gap).
//
// Products use mma.sync, m16n8k8 on TF32 operands (Tf32Tiles) or m16n8k16 on bf16 (Bf16Tiles,
// half the shared-memory bytes and twice the rate): a warp owns 16 rows of its block's 64-row
// tile; the other operand's tile is in shared memory, laid out so that every fragment read of a
// warp hits 32 different banks (each kind's at()). The kernels are written once over the kind.
// With bf16 tiles on an H100/H200 the handler runs the forward and the keys kernel on warpgroup
// products instead (flash_forward_wgmma.hpp, flash_backward_wgmma.hpp): the same tiles, the same
// sums in the same order, the same bits; the kernels here stay for other builds and TF32 tiles.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/flash_attention.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "gpt2/fast/async_copies.hpp"
#include "gpt2/fast/fast_math.hpp"  // fastExp2
#include "gpt2/fast/shape_support.hpp"  // flashFits, kFlashHead
#include "osprey/config.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/result.hpp"

namespace gpt2::fast_kernels {

// The head size these kernels are written for (fast/shape_support.hpp).
constexpr int kFlashHead = static_cast<int>(fast_shapes::kFlashHead);

namespace {  // internal linkage: every unit launches its own copy (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kFlashTile = 64;                 // rows of a block's tile, and of each tile it visits
constexpr int kFlashWarps = kFlashTile / 16;   // a warp owns 16 rows
constexpr int kFlashThreads = kFlashWarps * 32;
constexpr int kTileElements = kFlashTile * kFlashHead;

// How a product reads its shared tile as B:
//   ByRows      B[k][n] = tile[n][k], the tile read by rows  (q·kᵀ, dout·vᵀ, k·qᵀ, v·doutᵀ)
//   ByColumns   B[k][n] = tile[k][n]                          (p·v, ds·k, pᵀ·dout, dsᵀ·q)
enum class TileRead { ByRows, ByColumns };

// TF32 operands: tiles of floats, each TF32-rounded (to nearest, ties away) as it is stored.
struct Tf32Tiles {
  using Element = float;
  static constexpr int kSteps = 8;  // k-steps of 8 over the 64 columns
  static constexpr bool kHeldA = false;  // an accumulator is not an A fragment: through shared rows
  static constexpr int kKeysBlocks = 1;  // flashBackwardKeys' blocks a multiprocessor (fewer spill)
  static constexpr int kStages = 1;  // tiles loaded from the floats and rounded, one at a time
  static constexpr int kForwardRows = 1;    // flashForward's 16-row blocks of queries a warp
  static constexpr int kForwardBlocks = 4;  // flashForward's blocks a multiprocessor
  struct Fragment {
    std::uint32_t r[4];
  };
  // Where element (r, col) of a 64-wide shared tile lives. Each row's 4-float chunks are permuted
  // (an XOR on bits 2–4 of col, by r mod 8) so that a warp's fragment reads hit 32 different banks
  // whether they take 8 rows × 4 columns (A fragments, and B read as the transpose of a tile) or
  // 4 rows × 8 columns (B read as the tile itself); chunks stay whole, so 16-byte stores still fit.
  static __device__ __forceinline__ int at(int r, int col) {
    return r * kFlashHead + (col ^ (((r & 3) << 3) | (r & 4)));
  }
  static __device__ __forceinline__ std::uint32_t bits(float x) {
    std::uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
  }
  static __device__ __forceinline__ std::uint32_t word(const float* tile, int r, int col) {
    return __float_as_uint(tile[at(r, col)]);
  }
  // Fragments (PTX ISA, mma.m16n8k8 .tf32), with g = lane / 4 and c = lane % 4:
  //   a = A[g][c], A[g+8][c], A[g][c+4], A[g+8][c+4];  b = B[c][g], B[c+4][g];
  //   d = D[g][2c], D[g][2c+1], D[g+8][2c], D[g+8][2c+1].
  static __device__ __forceinline__ void loadA(Fragment& a, const float* rows, int ks, int g, int c) {
    a.r[0] = word(rows, g, ks * 8 + c);
    a.r[1] = word(rows, g + 8, ks * 8 + c);
    a.r[2] = word(rows, g, ks * 8 + c + 4);
    a.r[3] = word(rows, g + 8, ks * 8 + c + 4);
  }
  // B[k][n] = tile[n][k], and B[k][n] = tile[k][n].
  static __device__ __forceinline__ uint2 bByRows(const float* tile, int n, int ks, int c) {
    return {word(tile, n, ks * 8 + c), word(tile, n, ks * 8 + c + 4)};
  }
  static __device__ __forceinline__ uint2 bByColumns(const float* tile, int n, int ks, int c) {
    return {word(tile, ks * 8 + c, n), word(tile, ks * 8 + c + 4, n)};
  }
  // A lane's place in its fragments: g = lane / 4, c = lane % 4.
  struct Lane {
    int g, c;
    __device__ explicit Lane(int lane) : g(lane / 4), c(lane % 4) {}
  };
  // The B fragments of column blocks nt and nt + 1 (x, y and z, w).
  template <TileRead read>
  static __device__ __forceinline__ uint4 bTwo(const float* tile, int nt, int ks, const Lane& lane) {
    const int g = lane.g, c = lane.c;
    const uint2 b0 = read == TileRead::ByRows ? bByRows(tile, nt * 8 + g, ks, c) : bByColumns(tile, nt * 8 + g, ks, c);
    const uint2 b1 = read == TileRead::ByRows ? bByRows(tile, nt * 8 + 8 + g, ks, c)
                                              : bByColumns(tile, nt * 8 + 8 + g, ks, c);
    return {b0.x, b0.y, b1.x, b1.y};
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const Fragment& a, uint2 b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.x), "r"(b.y));
  }
  // Elements (r, col) and (r, col + 1), col even; and (r, col .. col + 3), col a multiple of 4.
  static __device__ __forceinline__ void storePair(float* tile, int r, int col, float x, float y) {
    *reinterpret_cast<float2*>(tile + at(r, col)) = make_float2(__uint_as_float(bits(x)), __uint_as_float(bits(y)));
  }
  static __device__ __forceinline__ void storeFour(float* tile, int r, int col, float4 v) {
    *reinterpret_cast<float4*>(tile + at(r, col)) = make_float4(__uint_as_float(bits(v.x)), __uint_as_float(bits(v.y)),
                                                                __uint_as_float(bits(v.z)), __uint_as_float(bits(v.w)));
  }
};

// bf16 operands: tiles of bf16, each rounded to nearest even as it is stored.
struct Bf16Tiles {
  using Element = __nv_bfloat16;
  static constexpr int kSteps = 4;  // k-steps of 16 over the 64 columns
  static constexpr bool kHeldA = true;  // an accumulator's blocks 2ks, 2ks + 1 are k-step ks's A
  static constexpr int kKeysBlocks = 3;  // flashBackwardKeys' blocks a multiprocessor (170 registers)
  // flashForward: each warp takes two 16-row blocks of queries, so that each B fragment of k and v
  // it loads from shared memory serves two products (the loads had been as many as the products
  // could take); 2 blocks of 128 queries a multiprocessor.
  static constexpr int kForwardRows = 2;
  static constexpr int kForwardBlocks = 2;
  // Tiles copied from the operands' bf16 twins (cp.async, 16 bytes a copy), the next one arriving
  // while this one is used.
  static constexpr int kStages = 2;
  struct Fragment {
    std::uint32_t r[4];
  };
  // A row is 8 chunks of 8 elements (16 bytes); chunk j of row r is stored at j XOR (r mod 8). A
  // warp's fragment reads take 8 rows at one column pair (A, and B read as the transpose of a
  // tile) or 8 rows at 8 consecutive columns (B read as the tile itself): 8 different chunks
  // either way, so 32 different banks.
  static __device__ __forceinline__ int at(int r, int col) {
    return r * kFlashHead + ((((col >> 3) ^ r) & 7) << 3) + (col & 7);
  }
  static __device__ __forceinline__ std::uint32_t pair(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return static_cast<std::uint32_t>(__bfloat16_as_ushort(lo)) |
           (static_cast<std::uint32_t>(__bfloat16_as_ushort(hi)) << 16);
  }
  static __device__ __forceinline__ std::uint32_t word(const __nv_bfloat16* tile, int r, int col) {  // col even
    return *reinterpret_cast<const std::uint32_t*>(tile + at(r, col));
  }
  // Fragments (PTX ISA, mma.m16n8k16 .bf16), each register two elements, the lower column (or
  // row, for b) in the low half; g = lane / 4 and c = lane % 4:
  //   a = A[g][2c..], A[g+8][2c..], A[g][2c+8..], A[g+8][2c+8..];  b = B[2c..][g], B[2c+8..][g];
  //   d as for TF32.
  // Each is loaded by ldmatrix, four 8 × 8 blocks at once (.trans for B read as the tile itself):
  // lanes 8i .. 8i + 7 give the rows of block i, each row one whole 16-byte chunk.
  static __device__ __forceinline__ uint4 blocks(const __nv_bfloat16* p) {
    uint4 r;
    const auto at = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "r"(at)
                 : "memory");
    return r;
  }
  static __device__ __forceinline__ uint4 blocksTransposed(const __nv_bfloat16* p) {
    uint4 r;
    const auto at = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "r"(at)
                 : "memory");
    return r;
  }
  // Blocks: rows 0–7 and 8–15 at columns 16ks, then the same at 16ks + 8.
  static __device__ __forceinline__ void loadA(Fragment& a, const __nv_bfloat16* rows, int ks, int g, int c) {
    const int lane = 4 * g + c, i = lane >> 3, j = lane & 7;
    const uint4 r = blocks(rows + at(j + 8 * (i & 1), ks * 16 + 8 * (i >> 1)));
    a.r[0] = r.x, a.r[1] = r.y, a.r[2] = r.z, a.r[3] = r.w;
  }
  // The A fragment of k-step ks from a 16 × 64 accumulator (columns 16ks .. 16ks + 15 are its
  // blocks 2ks and 2ks + 1, whose d registers hold exactly a's elements), rounded as storePair does.
  static __device__ __forceinline__ void heldA(Fragment& a, const float (&held)[8][4], int ks) {
    const auto two = [](float lo, float hi) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<const std::uint32_t*>(&p);
    };
    a.r[0] = two(held[2 * ks][0], held[2 * ks][1]);
    a.r[1] = two(held[2 * ks][2], held[2 * ks][3]);
    a.r[2] = two(held[2 * ks + 1][0], held[2 * ks + 1][1]);
    a.r[3] = two(held[2 * ks + 1][2], held[2 * ks + 1][3]);
  }
  // A lane's place in its fragments (g = lane / 4, c = lane % 4), and where its ldmatrix rows lie
  // in a tile, worked out once: bTwo's block i (lane / 8) of column block nt + (i >> 1) at k-step
  // ks, row j = lane % 8 of the block, is at(n + j, k) with n = 8·(nt + (i >> 1)) and k = 16ks +
  // 8·(i & 1) (read by rows), or at(k + j, n) (read by columns). n and k are multiples of 8, so
  // the swizzle sees only j, and
  //   at(n + j, k) = 512·nt + byRows[ks],     byRows[ks] = 512·(i >> 1) + 64j + 8·((2ks + (i & 1)) ^ j mod 8)
  //   at(k + j, n) = 1024·ks + byColumns[nt / 2],
  //                  byColumns[nt / 2] = 512·(i & 1) + 64j + 8·((nt + (i >> 1)) ^ j mod 8)
  // (nt even): one add a fragment, the rest a constant of the unrolled loops.
  struct Lane {
    int g, c;
    int byRows[kSteps], byColumns[4];
    __device__ explicit Lane(int lane) : g(lane / 4), c(lane % 4) {
      const int i = lane >> 3, j = lane & 7;
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) byRows[ks] = 512 * (i >> 1) + 64 * j + 8 * (((2 * ks + (i & 1)) ^ j) & 7);
#pragma unroll
      for (int h = 0; h < 4; ++h) byColumns[h] = 512 * (i & 1) + 64 * j + 8 * (((2 * h + (i >> 1)) ^ j) & 7);
    }
  };
  // Blocks: k 16ks and 16ks + 8 of column block nt, then of nt + 1 (nt even).
  template <TileRead read>
  static __device__ __forceinline__ uint4 bTwo(const __nv_bfloat16* tile, int nt, int ks, const Lane& lane) {
    return read == TileRead::ByRows ? blocks(tile + 512 * nt + lane.byRows[ks])
                                    : blocksTransposed(tile + 1024 * ks + lane.byColumns[nt / 2]);
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const Fragment& a, uint2 b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.x), "r"(b.y));
  }
  static __device__ __forceinline__ void storePair(__nv_bfloat16* tile, int r, int col, float x, float y) {
    *reinterpret_cast<__nv_bfloat162*>(tile + at(r, col)) = __floats2bfloat162_rn(x, y);
  }
  static __device__ __forceinline__ void storeFour(__nv_bfloat16* tile, int r, int col, float4 v) {
    __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(tile + at(r, col));
    p[0] = __floats2bfloat162_rn(v.x, v.y);
    p[1] = __floats2bfloat162_rn(v.z, v.w);
  }
};

// One k-step for R 16-row blocks of A at once (acc[r] += a[r] · B), each B fragment loaded once
// for all of them.
template <class K, TileRead read, int R>
__device__ __forceinline__ void productStepRows(float (*acc)[8][4], const typename K::Fragment* a,
                                                const typename K::Element* tile, int ks, const typename K::Lane& lane) {
#pragma unroll
  for (int nt = 0; nt < 8; nt += 2) {
    const uint4 b = K::template bTwo<read>(tile, nt, ks, lane);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      K::mma(acc[r][nt], a[r], uint2{b.x, b.y});
      K::mma(acc[r][nt + 1], a[r], uint2{b.z, b.w});
    }
  }
}

// One k-step of product() below, its A fragment given: one block of rows.
template <class K, TileRead read>
__device__ __forceinline__ void productStep(float (&acc)[8][4], const typename K::Fragment& a,
                                            const typename K::Element* tile, int ks, const typename K::Lane& lane) {
  productStepRows<K, read, 1>(&acc, &a, tile, ks, lane);
}

// acc[nt] (16 × 64) += A (16 rows at `rows`, 64 wide) · B, B the shared tile read as `read` says.
template <class K, TileRead read>
__device__ __forceinline__ void product(float (&acc)[8][4], const typename K::Element* rows,
                                        const typename K::Element* tile, const typename K::Lane& lane) {
#pragma unroll
  for (int ks = 0; ks < K::kSteps; ++ks) {
    typename K::Fragment a;
    K::loadA(a, rows, ks, lane.g, lane.c);
    productStep<K, read>(acc, a, tile, ks, lane);
  }
}

// A warp's 16 × 64 accumulator, rounded to the kind, into its 16 shared rows (the next product's A).
template <class K>
__device__ __forceinline__ void storeRows(typename K::Element* rows, const float (&acc)[8][4], int g, int c) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    K::storePair(rows, g, nt * 8 + 2 * c, acc[nt][0], acc[nt][1]);
    K::storePair(rows, g + 8, nt * 8 + 2 * c, acc[nt][2], acc[nt][3]);
  }
}

// acc (16 × 64) += A · B where A is a warp's 16 × 64 accumulator `held` (p or ds) rounded to the
// kind: from registers where the kind allows (kHeldA), else through the warp's 16 shared `rows`.
template <class K, TileRead read>
__device__ __forceinline__ void productOfHeld(float (&acc)[8][4], const float (&held)[8][4],
                                              typename K::Element* rows, const typename K::Element* tile,
                                              const typename K::Lane& lane) {
  if constexpr (K::kHeldA) {
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks) {
      typename K::Fragment a;
      K::heldA(a, held, ks);
      productStep<K, read>(acc, a, tile, ks, lane);
    }
  } else {
    __syncwarp();  // every lane is done with what the rows held
    storeRows<K>(rows, held, lane.g, lane.c);
    __syncwarp();
    product<K, read>(acc, rows, tile, lane);
  }
}

// Where a kernel writes an output: its floats, and optionally a second copy of them and their
// bf16 twin (the next linear layer's operand), each in the same layout; a null one is not written.
// `sums` (the backward's dqkv, where given): each warp's column sums of the 16 rows it writes, a
// row of the tensor's width for each group of 16 rows of a sequence (warpSums), which
// columnTotals adds into the qkv layer's bias gradient; it does not move with at().
struct OutputPlaces {
  float* data;
  float* copy = nullptr;
  __nv_bfloat16* twin = nullptr;
  float* sums = nullptr;
  __host__ __device__ OutputPlaces at(std::size_t offset) const {
    return {data ? data + offset : nullptr, copy ? copy + offset : nullptr, twin ? twin + offset : nullptr, sums};
  }
};
// The rows of out.sums a backward of B sequences of T rows writes: one for each 16 rows.
inline osprey::Index warpSumRows(osprey::Index B, osprey::Index T) { return B * ((T + 15) / 16); }

// A warp's 16 × 64 accumulator into rows rowA and rowA + 8 of a tensor (row r at r·ld), the rows
// below T only, row rowA's values times scales[0] and row rowA + 8's times scales[1]. Where `sums`
// is given, the columns' sums of the values written go there too: each lane's two rows added,
// then the warp's eight row pairs by a butterfly (every lane of a column gets the same bits), and
// written by the lanes of rows 0 and 8.
__device__ __forceinline__ void storeOutputRows(const OutputPlaces& base, std::size_t ld, const float (&acc)[8][4],
                                                int rowA, int T, const float (&scales)[2], int c,
                                                float* sums = nullptr) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = rowA + 8 * half;
    if (row >= T) continue;
    const std::size_t at = static_cast<std::size_t>(row) * ld + 2 * c;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const float x = acc[nt][2 * half] * scales[half], y = acc[nt][2 * half + 1] * scales[half];
      if (base.data) *reinterpret_cast<float2*>(base.data + at + nt * 8) = make_float2(x, y);
      if (base.copy) *reinterpret_cast<float2*>(base.copy + at + nt * 8) = make_float2(x, y);
      if (base.twin) *reinterpret_cast<__nv_bfloat162*>(base.twin + at + nt * 8) = __floats2bfloat162_rn(x, y);
    }
  }
  if (!sums) return;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    float x = rowA < T ? acc[nt][0] * scales[0] : 0.0f, y = rowA < T ? acc[nt][1] * scales[0] : 0.0f;
    if (rowA + 8 < T) x += acc[nt][2] * scales[1], y += acc[nt][3] * scales[1];
#pragma unroll
    for (int across = 4; across < 32; across *= 2) {
      x += __shfl_xor_sync(0xffffffffu, x, across);
      y += __shfl_xor_sync(0xffffffffu, y, across);
    }
    if (threadIdx.x % 32 < 4) *reinterpret_cast<float2*>(sums + nt * 8 + 2 * c) = make_float2(x, y);
  }
}

// f(r, piece) for this thread's share of a tile's 64 rows cut into kPerRow pieces each: pieces
// threadIdx.x + u·kFlashThreads for u below a constant (every flash kernel that fetches tiles runs
// with kFlashThreads threads a block), so that the loop unrolls whole with each piece's place
// worked out once (a loop from threadIdx.x had a count the compiler could not know, and became a
// generic loop of index arithmetic in every tile's fetch).
template <int kPerRow, class F>
__device__ __forceinline__ void eachPiece(F f) {
  constexpr int kPieces = kFlashTile * kPerRow;
  static_assert(kPieces % kFlashThreads == 0);
#pragma unroll
  for (int u = 0; u < kPieces / kFlashThreads; ++u) {
    const int i = static_cast<int>(threadIdx.x) + u * kFlashThreads;
    f(i / kPerRow, i % kPerRow);
  }
}

// Rows [row0, row0 + 64) of a head's 64 columns (`src` is the head's first column of row 0; rows
// `ld` floats apart) into a shared tile, rounded to the kind; rows at or past T are zeros.
template <class K>
__device__ __forceinline__ void loadTile(typename K::Element* tile, const float* src, std::size_t ld, int row0, int T) {
  eachPiece<kFlashHead / 4>([&](int r, int q) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < T) v = *reinterpret_cast<const float4*>(src + static_cast<std::size_t>(row0 + r) * ld + 4 * q);
    K::storeFour(tile, r, 4 * q, v);
  });
}

// A tensor the kernels read tiles of: its floats, and (with bf16 tiles) its bf16 twin.
struct TileSource {
  const float* floats;
  const __nv_bfloat16* halves = nullptr;
  __device__ TileSource at(std::size_t offset) const {
    return {floats + offset, halves ? halves + offset : nullptr};
  }
};

// Rows [row0, row0 + 64) of a head's 64 columns of `src` (rows ld elements apart) into a shared
// tile, rows at or past T zeros: loadTile from the floats (one stage), or copied from the bf16
// twin asynchronously (two stages; the caller commits and awaits the copies).
template <class K>
__device__ __forceinline__ void fetchTile(typename K::Element* tile, const TileSource& src, std::size_t ld, int row0,
                                          int T) {
  if constexpr (K::kStages == 1) {
    loadTile<K>(tile, src.floats, ld, row0, T);
  } else {
    eachPiece<kFlashHead / 8>([&](int r, int chunk) {
      const bool in = row0 + r < T;
      copy16(tile + K::at(r, 8 * chunk), src.halves + (in ? static_cast<std::size_t>(row0 + r) * ld : 0) + 8 * chunk,
             in);
    });
  }
}

// The max and sum of a 16-row accumulator's rows g and g + 8 are split over the 4 lanes of a group
// (a quad: lanes 4g .. 4g + 3).
__device__ __forceinline__ float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// On a diagonal tile, the elements of a warp's accumulator whose key comes after its query set to
// `value` (the other tiles of a causal row need no mask). The lane's rows are rowA and rowA + 8 =
// rowB and its columns col0 + 8nt + 2c + (e & 1); rows are queries and columns keys
// (kKeysAreColumns: the forward and dq), or rows keys and columns queries (dk and dv).
template <bool kKeysAreColumns>
__device__ __forceinline__ void maskFuture(float (&acc)[8][4], int col0, int rowA, int rowB, int c, float value) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = col0 + nt * 8 + 2 * c + (e & 1), row = e < 2 ? rowA : rowB;
      if (kKeysAreColumns ? col > row : col < row) acc[nt][e] = value;
    }
}

// Where block (·, b·NH + hh)'s head starts in (B, T, 3C), (B, T, C) and (B, NH, T) tensors.
struct HeadPlace {
  std::size_t wide;   // b·T·3C + hh·hs: its q columns (k is C further, v 2C; so are dk and dv)
  std::size_t ld;     // 3C
  std::size_t row;    // b·T·C + hh·hs
  std::size_t stats;  // (b·NH + hh)·T
  std::size_t sums;   // b·⌈T/16⌉·3C + hh·hs: its q columns of its sequence's first row of warp sums
};
__device__ __forceinline__ HeadPlace headPlace(int T, int C, int NH) {
  const int bh = static_cast<int>(blockIdx.y), b = bh / NH, hh = bh % NH;
  return {static_cast<std::size_t>(b) * T * 3 * C + hh * kFlashHead, static_cast<std::size_t>(3) * C,
          static_cast<std::size_t>(b) * T * C + hh * kFlashHead, static_cast<std::size_t>(bh) * T,
          static_cast<std::size_t>(b) * ((T + 15) / 16) * 3 * C + hh * kFlashHead};
}
// Where the warp writing rows first .. first + 15 of a head's dqkv section (0: dq, 1: dk, 2: dv)
// puts its column sums (OutputPlaces::sums), or null: none asked for, or rows all past T.
__device__ __forceinline__ float* warpSums(const OutputPlaces& out, const HeadPlace& head, int section, int C,
                                           int first, int T) {
  if (!out.sums || first >= T) return nullptr;
  return out.sums + head.sums + static_cast<std::size_t>(first / 16) * head.ld + static_cast<std::size_t>(section) * C;
}

// k and v of key tile kt into kTile and vTile: the columns C and 2C after the head's q columns
// (q, qkv.at(head.wide)), as the forward and dq's kernel fetch each stage of keys.
template <class K>
__device__ __forceinline__ void fetchKeyTile(typename K::Element* kTile, typename K::Element* vTile,
                                            const TileSource& q, const HeadPlace& head, int C, int kt, int T) {
  fetchTile<K>(kTile, q.at(C), head.ld, kt * kFlashTile, T);
  fetchTile<K>(vTile, q.at(2 * C), head.ld, kt * kFlashTile, T);
}

// One key tile's step of the online softmax for a warp's 16 rows of queries (the lane's rows g and
// g + 8): s holds the tile's scores before scaling, -inf where masked, and becomes p = exp2(s·scaleLog2
// - m) with m the rows' new running maxima (in log2 units); l, the lane's share of each row's sum,
// and o, the rows' output so far, are rescaled to the new maxima and l takes this tile's share.
__device__ __forceinline__ void onlineSoftmax(float (&s)[8][4], float (&m)[2], float (&l)[2], float (&o)[8][4],
                                              float scaleLog2) {
  // The rows' maxima of the scores before scaling (the scale is positive, and rounding a product
  // keeps order, so the scaled maximum is the maximum scaled), then in m's units.
  float top[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) top[e >> 1] = fmaxf(top[e >> 1], s[nt][e]);
  // Key 0 is in every row's prefix, so top is finite from the first tile on.
  top[0] = fmaxf(m[0], quadMax(top[0]) * scaleLog2);
  top[1] = fmaxf(m[1], quadMax(top[1]) * scaleLog2);
  const float alpha[2] = {fastExp2(m[0] - top[0]), fastExp2(m[1] - top[1])};
  l[0] *= alpha[0];
  l[1] *= alpha[1];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = fastExp2(__fmaf_rn(s[nt][e], scaleLog2, -top[e >> 1]));
      l[e >> 1] += s[nt][e];  // this lane's share of the row; the group adds them at the end
      o[nt][e] *= alpha[e >> 1];
    }
  m[0] = top[0];
  m[1] = top[1];
}

// The end of a warp's 16 rows of the forward (the lane's rows rowA and rowA + 8): o / l into out,
// and m + log2 l into lse, the rows below T only.
__device__ __forceinline__ void finishRows(const OutputPlaces& out, float* lse, const HeadPlace& head,
                                           const float (&o)[8][4], const float (&m)[2], float (&l)[2], int rowA,
                                           int T, int C, int c) {
  l[0] = quadSum(l[0]);
  l[1] = quadSum(l[1]);
  const float inverse[2] = {1.0f / l[0], 1.0f / l[1]};
  storeOutputRows(out.at(head.row), static_cast<std::size_t>(C), o, rowA, T, inverse, c);
  if (c == 0) {
    if (rowA < T) lse[head.stats + rowA] = m[0] + log2f(l[0]);
    if (rowA + 8 < T) lse[head.stats + rowA + 8] = m[1] + log2f(l[1]);
  }
}

// out (B, T, C) and lse (B, NH, T), the log-sum-exp of each softmax row in base 2 (of s·log2 e).
// Grid (query tiles of 64·R rows, B·NH), the longest tiles first; warp w owns rows 16R·w ..
// 16R·w + 16R - 1 of its block's tile (R = K::kForwardRows) and visits the key tiles up to its
// last row's, so each row sees the same tiles, in the same order, whatever R is.
template <class K>
__global__ void __launch_bounds__(kFlashThreads, K::kForwardBlocks)
    flashForward(TileSource qkv, OutputPlaces out, float* lse, int T, int C, int NH, float scaleLog2) {
  using E = typename K::Element;
  constexpr int S = K::kStages, R = K::kForwardRows;
  static_assert(R == 1 || K::kHeldA, "more than one row block a warp needs p held in registers");
  extern __shared__ __align__(16) unsigned char shared[];
  E* sQ = reinterpret_cast<E*>(shared);  // R tiles of q, one tile of 64R rows; then each warp's p rows
  E* sK = sQ + R * kTileElements;        // S stages of k, then of v
  E* sV = sK + S * kTileElements;
  const int tile = static_cast<int>(gridDim.x - 1 - blockIdx.x), q0 = tile * kFlashTile * R;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, c = lane % 4;
  const typename K::Lane place(lane);  // its fragments' places, worked out once
  const HeadPlace head = headPlace(T, C, NH);
  const TileSource q = qkv.at(head.wide);
  E* rows = sQ + warp * 16 * R * kFlashHead;  // the warp's q rows, then its p rows
  const auto fetchKeys = [&](int kt, int stage) {
    fetchKeyTile<K>(sK + stage * kTileElements, sV + stage * kTileElements, q, head, C, kt, T);
  };
#pragma unroll
  for (int r = 0; r < R; ++r) fetchTile<K>(sQ + r * kTileElements, q, head.ld, q0 + r * kFlashTile, T);
  if constexpr (S == 2) fetchKeys(0, 0);
  commitCopies();
  awaitCopies<0>();
  __syncthreads();
  typename K::Fragment qa[K::kSteps][R];
#pragma unroll
  for (int ks = 0; ks < K::kSteps; ++ks)
#pragma unroll
    for (int r = 0; r < R; ++r) K::loadA(qa[ks][r], rows + r * 16 * kFlashHead, ks, g, c);
  __syncwarp();
  const int first = q0 + warp * 16 * R;  // the warp's first row; row block r's lanes hold rowA[r], + 8
  int rowA[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rowA[r] = first + 16 * r + g;
  const int lastKeys = (q0 + kFlashTile * R - 1) / kFlashTile;      // the block's last key tile
  const int ownLast = (first + 16 * R - 1) / kFlashTile;             // the warp's
  float o[R][8][4] = {}, m[R][2], l[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r) m[r][0] = m[r][1] = -INFINITY, l[r][0] = l[r][1] = 0.f;
  for (int kt = 0; kt <= lastKeys; ++kt) {
    const int stage = S == 2 ? kt & 1 : 0;
    if constexpr (S == 2) {
      if (kt < lastKeys) fetchKeys(kt + 1, stage ^ 1);  // into the stage every warp finished at kt - 1
      commitCopies();
      awaitCopies<1>();  // this stage's copies are in
    } else {
      __syncthreads();  // every warp is done with the previous k and v
      fetchKeys(kt, 0);
    }
    __syncthreads();
    if (kt <= ownLast) {  // (a tile wholly after the warp's rows adds nothing to them)
      const E* k = sK + stage * kTileElements;
      const E* v = sV + stage * kTileElements;
      float s[R][8][4] = {};
#pragma unroll
      for (int ks = 0; ks < K::kSteps; ++ks) productStepRows<K, TileRead::ByRows, R>(s, qa[ks], k, ks, place);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (kt == (first + 16 * r) / kFlashTile)  // the row block's diagonal tile
          maskFuture<true>(s[r], kt * kFlashTile, rowA[r], rowA[r] + 8, c, -INFINITY);
        onlineSoftmax(s[r], m[r], l[r], o[r], scaleLog2);
      }
      if constexpr (K::kHeldA) {  // o += p·v, p's A fragments from the registers
#pragma unroll
        for (int ks = 0; ks < K::kSteps; ++ks) {
          typename K::Fragment a[R];
#pragma unroll
          for (int r = 0; r < R; ++r) K::heldA(a[r], s[r], ks);
          productStepRows<K, TileRead::ByColumns, R>(o, a, v, ks, place);
        }
      } else {
        productOfHeld<K, TileRead::ByColumns>(o[0], s[0], rows, v, place);
      }
    }
    if constexpr (S == 2) __syncthreads();  // every warp is done with this stage before it is refilled
  }
#pragma unroll
  for (int r = 0; r < R; ++r) finishRows(out, lse, head, o[r], m[r], l[r], rowA[r], T, C, c);
}

// Drow (B, NH, T) = Σ over the head's channels of dout ∘ out; a warp per (b, t, head). Where
// `twin` is given, dout's bf16 rounding is written there as it is read (the backward's tiles).
__global__ void __launch_bounds__(256)
    flashRowDots(const float* dout, const float* out, float* rowDot, osprey::Index rows, int T, int C, int NH,
                 __nv_bfloat16* twin = nullptr) {
  const osprey::Index w = static_cast<osprey::Index>(blockIdx.x) * 8 + threadIdx.x / 32;  // (b·T + t)·NH + hh
  if (w >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32), hh = static_cast<int>(w % NH);
  const osprey::Index bt = w / NH, b = bt / T, t = bt % T;
  const std::size_t at = static_cast<std::size_t>(bt) * C + hh * kFlashHead + 2 * lane;
  const float2 x = *reinterpret_cast<const float2*>(dout + at), y = *reinterpret_cast<const float2*>(out + at);
  if (twin) *reinterpret_cast<__nv_bfloat162*>(twin + at) = __floats2bfloat162_rn(x.x, x.y);
  float d = x.x * y.x + x.y * y.y;
  for (int o = 16; o > 0; o /= 2) d += __shfl_xor_sync(0xffffffffu, d, o);
  if (lane == 0) rowDot[(b * NH + hh) * T + t] = d;
}

// The per-query statistics of query tile q0 into shared memory: lse, and Drow, copied
// asynchronously (the caller commits and awaits); rows past T get lse = +inf, so their
// p = exp2(s - lse) is 0.
__device__ __forceinline__ void fetchRowStats(float* sLse, float* sDot, const float* lse, const float* rowDot, int q0,
                                              int T) {
  eachPiece<2>([&](int r, int which) {  // piece 0 the row's lse, piece 1 its Drow
    const bool dot = which == 1, in = q0 + r < T;
    float* to = (dot ? sDot : sLse) + r;
    if (in)
      copy4(to, (dot ? rowDot : lse) + q0 + r);
    else
      *to = dot ? 0.0f : INFINITY;
  });
}

// dsᵀ handed from flashBackwardKeys to flashBackwardQueriesFromDs (bf16 tiles): for each head and
// each tile pair (query tile qt, key tile kt ≤ qt), the 64 keys × 64 queries of dsᵀ rounded to
// bf16 (the rounding the keys kernel's own dk product reads), as 64 blocks of 8 × 8, each block 8
// rows of 16 bytes. Block (key block kb, query block qb) is block ((kb / 2)·8 + qb)·2 + kb mod 2:
// a warp of the keys kernel holds keys 16w .. 16w + 15 of its accumulator, and stores each block
// as 32 lanes' consecutive words (128 bytes, one store). In uint32 words (two bf16 each):
constexpr int kDsTileWords = kTileElements / 2;
__device__ __forceinline__ std::size_t dsTileAt(int tiles, int qt, int kt) {
  const std::size_t pairs = static_cast<std::size_t>(tiles) * (tiles + 1) / 2;
  return (static_cast<std::size_t>(blockIdx.y) * pairs + static_cast<std::size_t>(qt) * (qt + 1) / 2 + kt) *
         kDsTileWords;
}
// A keys-kernel warp's dsᵀ accumulator (its 16 keys × the tile's 64 queries) into its blocks.
__device__ __forceinline__ void storeDsBlocks(std::uint32_t* tile, const float (&ds)[8][4], int warp, int lane) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(ds[nt][2 * half], ds[nt][2 * half + 1]);
      tile[((warp * 8 + nt) * 2 + half) * 32 + lane] = *reinterpret_cast<const std::uint32_t*>(&pair);
    }
}
// The A fragment of ds (queries 16w .. 16w + 15 × keys 16ks .. 16ks + 15) at k-step ks from a
// stored dsᵀ tile in shared memory: ldmatrix .trans gives a block stored key-major as its
// query-major fragment; lanes 8i .. 8i + 7 give the rows of key block 2ks + (i >> 1), query block
// 2w + (i & 1), which are a's registers 0–3 in order.
__device__ __forceinline__ Bf16Tiles::Fragment dsFragment(const __nv_bfloat16* tile, int warp, int ks, int lane) {
  const int i = lane >> 3, j = lane & 7;
  const uint4 r = Bf16Tiles::blocksTransposed(tile + ((ks * 8 + 2 * warp + (i & 1)) * 2 + (i >> 1)) * 64 + 8 * j);
  return {{r.x, r.y, r.z, r.w}};
}

// The tiles a keys block reads (flashBackwardKeys, flashBackwardKeysWgmma): its own key tile's k
// and v, fetched once, and each query tile it visits, q and dout with their rows' lse and Drow, in
// S stages; the caller commits and awaits the copies. Each kernel lays out its shared memory (the
// warpgroup kernel's tiles first, on the swizzle's 1024-byte boundary) and gives the two runs:
// `tiles`, k, v, then S stages of q and S of dout; `stats`, S stages of lse and S of Drow.
template <class K>
struct KeysBlockTiles {
  using E = typename K::Element;
  static constexpr int S = K::kStages;
  E* sK;         // the block's k
  E* sV;         // and v
  E* sQueries;   // S stages of q
  E* sOuts;      // and of dout
  float* sLses;  // S stages of lse
  float* sDots;  // and of Drow
  HeadPlace head;
  TileSource qkv, dout;       // the kernel's: the head's columns start at head.wide and head.row,
  const float *lse, *rowDot;  // and its rows at head.stats
  int C, T;

  __device__ KeysBlockTiles(E* tiles, float* stats, const HeadPlace& head, TileSource qkv, TileSource dout,
                            const float* lse, const float* rowDot, int C, int T)
      : sK(tiles),
        sV(sK + kTileElements),
        sQueries(sV + kTileElements),
        sOuts(sQueries + S * kTileElements),
        sLses(stats),
        sDots(sLses + S * kFlashTile),
        head(head),
        qkv(qkv),
        dout(dout),
        lse(lse),
        rowDot(rowDot),
        C(C),
        T(T) {}
  // k and v of key tile kt.
  __device__ __forceinline__ void fetchOwn(int kt) const {
    fetchTile<K>(sK, qkv.at(head.wide + C), head.ld, kt * kFlashTile, T);
    fetchTile<K>(sV, qkv.at(head.wide + 2 * C), head.ld, kt * kFlashTile, T);
  }
  // q, dout, lse and Drow of query tile qt into stage `stage`.
  __device__ __forceinline__ void fetchQueries(int qt, int stage) const {
    fetchTile<K>(sQueries + stage * kTileElements, qkv.at(head.wide), head.ld, qt * kFlashTile, T);
    fetchTile<K>(sOuts + stage * kTileElements, dout.at(head.row), static_cast<std::size_t>(C), qt * kFlashTile, T);
    fetchRowStats(sLses + stage * kFlashTile, sDots + stage * kFlashTile, lse + head.stats, rowDot + head.stats,
                  qt * kFlashTile, T);
  }
};

// dk and dv into sections 1 and 2 of dqkv (B, T, 3C). Grid (key tiles, B·NH); block j visits the
// query tiles j, j + 1, ...; its warps own 16 keys each, so they compute the transposed products
// (sᵀ = k·qᵀ, dpᵀ = v·doutᵀ) and their own rows of dk and dv.
template <class K>
__global__ void __launch_bounds__(kFlashThreads, K::kKeysBlocks)
    flashBackwardKeys(TileSource qkv, TileSource dout, const float* lse, const float* rowDot, OutputPlaces dqkv,
                      int T, int C, int NH, float scaleLog2, float scale, std::uint32_t* dsT = nullptr) {
  using E = typename K::Element;
  constexpr int S = K::kStages;
  extern __shared__ __align__(16) unsigned char shared[];
  float* sStats = reinterpret_cast<float*>(shared);               // S stages of lse, then of Drow
  E* sTiles = reinterpret_cast<E*>(sStats + 2 * S * kFlashTile);  // k, v, S stages of q, then of dout
  E* sP = sTiles + (2 + 2 * S) * kTileElements;  // each warp's pᵀ, then dsᵀ (kinds without kHeldA)
  const int tile = static_cast<int>(blockIdx.x), k0 = tile * kFlashTile, tiles = static_cast<int>(gridDim.x);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, c = lane % 4;
  const typename K::Lane place(lane);  // its fragments' places, worked out once
  const HeadPlace head = headPlace(T, C, NH);
  const KeysBlockTiles<K> block(sTiles, sStats, head, qkv, dout, lse, rowDot, C, T);
  block.fetchOwn(tile);
  if constexpr (S == 2) block.fetchQueries(tile, 0);
  commitCopies();
  const E* kRows = block.sK + warp * 16 * kFlashHead;
  const E* vRows = block.sV + warp * 16 * kFlashHead;
  E* pRows = sP + warp * 16 * kFlashHead;
  const int keyA = k0 + warp * 16 + g, keyB = keyA + 8;
  float dk[8][4] = {}, dv[8][4] = {};
  for (int qt = tile; qt < tiles; ++qt) {
    const int q0 = qt * kFlashTile, stage = S == 2 ? (qt - tile) & 1 : 0;
    if constexpr (S == 2) {
      if (qt + 1 < tiles) block.fetchQueries(qt + 1, stage ^ 1);  // into the stage every warp finished
      commitCopies();
      awaitCopies<1>();
    } else {
      __syncthreads();  // every warp is done with the previous tiles
      block.fetchQueries(qt, 0);
      commitCopies();
      awaitCopies<0>();
    }
    __syncthreads();
    const E* sQ = block.sQueries + stage * kTileElements;
    const E* sO = block.sOuts + stage * kTileElements;
    const float* sLse = block.sLses + stage * kFlashTile;
    const float* sDot = block.sDots + stage * kFlashTile;
    // pᵀ[key][query] = exp2(s·log2 e - lse[query]); 0 where the query comes before the key.
    float p[8][4] = {};
    product<K, TileRead::ByRows>(p, kRows, sQ, place);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) p[nt][e] = fastExp2(__fmaf_rn(p[nt][e], scaleLog2, -sLse[nt * 8 + 2 * c + (e & 1)]));
    if (qt == tile) maskFuture<false>(p, q0, keyA, keyB, c, 0.0f);
    productOfHeld<K, TileRead::ByColumns>(dv, p, pRows, sO, place);  // dv += pᵀ·dout
    float dp[8][4] = {};
    product<K, TileRead::ByRows>(dp, vRows, sO, place);  // dpᵀ = v·doutᵀ
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[nt][e] = p[nt][e] * (dp[nt][e] - sDot[nt * 8 + 2 * c + (e & 1)]);
    if constexpr (K::kHeldA)
      if (dsT) storeDsBlocks(dsT + dsTileAt(tiles, qt, tile), dp, warp, lane);  // for flashBackwardQueriesFromDs
    productOfHeld<K, TileRead::ByColumns>(dk, dp, pRows, sQ, place);  // dk += dsᵀ·q
    if constexpr (S == 2) __syncthreads();  // every warp is done with this stage before it is refilled
  }
  storeOutputRows(dqkv.at(head.wide + C), head.ld, dk, keyA, T, {scale, scale}, c,
                  warpSums(dqkv, head, 1, C, k0 + warp * 16, T));
  storeOutputRows(dqkv.at(head.wide + 2 * C), head.ld, dv, keyA, T, {1.0f, 1.0f}, c,
                  warpSums(dqkv, head, 2, C, k0 + warp * 16, T));
}

// dq into section 0 of dqkv. Grid (query tiles, B·NH), the longest first; block i visits the key
// tiles 0 .. i.
template <class K>
__global__ void __launch_bounds__(kFlashThreads, 3)
    flashBackwardQueries(TileSource qkv, TileSource dout, const float* lse, const float* rowDot, OutputPlaces dqkv,
                         int T, int C, int NH, float scaleLog2, float scale) {
  using E = typename K::Element;
  constexpr int S = K::kStages;
  extern __shared__ __align__(16) unsigned char shared[];
  E* sQ = reinterpret_cast<E*>(shared);
  E* sO = sQ + kTileElements;      // dout
  E* sK = sO + kTileElements;      // S stages of k, then of v
  E* sV = sK + S * kTileElements;
  E* sP = sV + S * kTileElements;  // each warp's ds (kinds without kHeldA)
  const int tile = static_cast<int>(gridDim.x - 1 - blockIdx.x), q0 = tile * kFlashTile;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, c = lane % 4;
  const typename K::Lane place(lane);  // its fragments' places, worked out once
  const HeadPlace head = headPlace(T, C, NH);
  const TileSource q = qkv.at(head.wide);
  const auto fetchKeys = [&](int kt, int stage) {
    fetchKeyTile<K>(sK + stage * kTileElements, sV + stage * kTileElements, q, head, C, kt, T);
  };
  fetchTile<K>(sQ, q, head.ld, q0, T);
  fetchTile<K>(sO, dout.at(head.row), static_cast<std::size_t>(C), q0, T);
  if constexpr (S == 2) fetchKeys(0, 0);
  commitCopies();
  const E* qRows = sQ + warp * 16 * kFlashHead;
  const E* oRows = sO + warp * 16 * kFlashHead;
  E* dsRows = sP + warp * 16 * kFlashHead;
  const int rowA = q0 + warp * 16 + g, rowB = rowA + 8;
  const float rowLse[2] = {rowA < T ? lse[head.stats + rowA] : INFINITY, rowB < T ? lse[head.stats + rowB] : INFINITY};
  const float rowD[2] = {rowA < T ? rowDot[head.stats + rowA] : 0.0f, rowB < T ? rowDot[head.stats + rowB] : 0.0f};
  float dq[8][4] = {};
  for (int kt = 0; kt <= tile; ++kt) {
    const int stage = S == 2 ? kt & 1 : 0;
    if constexpr (S == 2) {
      if (kt < tile) fetchKeys(kt + 1, stage ^ 1);  // into the stage every warp finished at kt - 1
      commitCopies();
      awaitCopies<1>();
    } else {
      __syncthreads();  // every warp is done with the previous k and v
      fetchKeys(kt, 0);
    }
    __syncthreads();
    const E* k = sK + stage * kTileElements;
    const E* v = sV + stage * kTileElements;
    float p[8][4] = {}, dp[8][4] = {};
    product<K, TileRead::ByRows>(p, qRows, k, place);   // s = q·kᵀ
    product<K, TileRead::ByRows>(dp, oRows, v, place);  // dp = dout·vᵀ
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e >> 1;
        dp[nt][e] = fastExp2(__fmaf_rn(p[nt][e], scaleLog2, -rowLse[half])) * (dp[nt][e] - rowD[half]);
      }
    if (kt == tile) maskFuture<true>(dp, kt * kFlashTile, rowA, rowB, c, 0.0f);
    productOfHeld<K, TileRead::ByColumns>(dq, dp, dsRows, k, place);  // dq += ds·k
    if constexpr (S == 2) __syncthreads();  // every warp is done with this stage before it is refilled
  }
  storeOutputRows(dqkv.at(head.wide), head.ld, dq, rowA, T, {scale, scale}, c,
                  warpSums(dqkv, head, 0, C, q0 + warp * 16, T));
}

// dq into section 0 of dqkv from the dsᵀ tiles flashBackwardKeys stored (bf16 tiles): dq = Σ ds·k
// / sqrt(hs), one product a tile pair where flashBackwardQueries recomputes s and dp (two more).
// Grid (query tiles, B·NH), the longest first; block i visits the key tiles 0 .. i, their k and
// dsᵀ tiles copied in two stages.
__global__ void __launch_bounds__(kFlashThreads)
    flashBackwardQueriesFromDs(TileSource qkv, const std::uint32_t* dsT, OutputPlaces dqkv, int T, int C, int NH,
                               float scale) {
  using K = Bf16Tiles;
  using E = __nv_bfloat16;
  extern __shared__ __align__(16) unsigned char shared[];
  E* sK = reinterpret_cast<E*>(shared);  // 2 stages of k, then of dsᵀ (as stored)
  E* sDs = sK + 2 * kTileElements;
  const int tiles = static_cast<int>(gridDim.x), tile = tiles - 1 - static_cast<int>(blockIdx.x);
  const int q0 = tile * kFlashTile;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const K::Lane place(lane);
  const HeadPlace head = headPlace(T, C, NH);
  const TileSource k = qkv.at(head.wide + C);
  const std::uint32_t* ds = dsT + dsTileAt(tiles, tile, 0);  // pair (tile, kt) at kt·kDsTileWords
  const auto fetch = [&](int kt, int stage) {
    fetchTile<K>(sK + stage * kTileElements, k, head.ld, kt * kFlashTile, T);
    eachPiece<kFlashHead / 8>([&](int r, int chunk) {  // 16 bytes of the tile a piece, as stored
      const int at = 8 * (r * (kFlashHead / 8) + chunk);
      copy16(sDs + stage * kTileElements + at, ds + static_cast<std::size_t>(kt) * kDsTileWords + at / 2, true);
    });
  };
  fetch(0, 0);
  commitCopies();
  float dq[8][4] = {};
  for (int kt = 0; kt <= tile; ++kt) {
    const int stage = kt & 1;
    if (kt < tile) fetch(kt + 1, stage ^ 1);  // into the stage every warp finished at kt - 1
    commitCopies();
    awaitCopies<1>();
    __syncthreads();
    const E* kTile = sK + stage * kTileElements;
    const E* dsTile = sDs + stage * kTileElements;
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks)
      productStep<K, TileRead::ByColumns>(dq, dsFragment(dsTile, warp, ks, lane), kTile, ks, place);  // dq += ds·k
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  storeOutputRows(dqkv.at(head.wide), head.ld, dq, q0 + warp * 16 + place.g, T, {scale, scale}, place.c,
                  warpSums(dqkv, head, 0, C, q0 + warp * 16, T));
}

// Shared memory: the fixed tiles, S stages of the visited ones, and the p rows where kHeldA is false.
template <class K>
constexpr std::size_t kFlashForwardShared =
    (K::kForwardRows + 2 * K::kStages) * kTileElements * sizeof(typename K::Element);
template <class K>
constexpr std::size_t kFlashKeysShared = (2 + 2 * K::kStages + (K::kHeldA ? 0 : 1)) * kTileElements *
                                             sizeof(typename K::Element) +
                                         2 * K::kStages * kFlashTile * sizeof(float);
template <class K>
constexpr std::size_t kFlashQueriesShared =
    (2 + 2 * K::kStages + (K::kHeldA ? 0 : 1)) * kTileElements * sizeof(typename K::Element);
constexpr std::size_t kFlashQueriesFromDsShared = 4 * kTileElements * sizeof(__nv_bfloat16);

// Opting in to more than 48 KiB of dynamic shared memory (a kernel's attribute on the current
// device; set before each launch, a host call of no device work).
template <class Kernel>
cudaError_t allowShared(Kernel kernel, std::size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

}  // namespace

// Whether the flash kernels take attention of this shape: head size 64, and B·NH within a grid's
// second dimension (fast/shape_support.hpp, where host tests ask it too).
using fast_shapes::flashFits;

namespace flash_detail {
inline float scaleLog2() { return static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(kFlashHead))); }
inline float scale() { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(kFlashHead))); }
// Tiles of `rows` queries (or keys) covering T.
inline unsigned tiles(osprey::Index T, osprey::Index rows = kFlashTile) {
  return static_cast<unsigned>((T + rows - 1) / rows);
}
// The alignment the kernels' accesses need of each pointer they are given. Every offset they add
// to one is a whole number of elements that keeps it (heads of 64, rows of C or 3C with C a
// multiple of 64: flashFits; within a head a lane's 2, 4 or 8), so the pointer's own alignment
// decides: 16 bytes for tiles (float4 loads of the floats, cp.async of 16 bytes of the bf16 twin)
// and the dsT scratch; 8 for the floats of an output (float2 stores) and the row dots' float2
// loads; 4 for bf16 pairs and single floats. A pointer off them is an Error naming the kernel,
// checked before the launch, not a misaligned-address fault of the device (a part of a buffer at
// an odd float offset, as the saved output once was: fast_shapes::flashSaved).
inline osprey::Result<void> aligned(const char* kernel, const char* operand, const void* p, std::uintptr_t bytes) {
  if (reinterpret_cast<std::uintptr_t>(p) % bytes == 0) return {};
  return osprey::Error{fmt::format("flash attention (kernel {}): {} at {} is not on {} bytes, as the kernel's vector "
                                   "accesses need",
                                   kernel, operand, p, bytes)};
}
// A tile source as kind K reads it: the floats (TF32 tiles) or the bf16 twin (bf16 tiles).
template <class K>
osprey::Result<void> tilesAligned(const char* kernel, const char* operand, const TileSource& src) {
  if constexpr (K::kStages == 1) return aligned(kernel, operand, src.floats, 16);
  else return aligned(kernel, operand, src.halves, 16);
}
inline osprey::Result<void> placesAligned(const char* kernel, const OutputPlaces& out) {
  OSPREY_CHECK(aligned(kernel, "the output", out.data, 8));
  OSPREY_CHECK(aligned(kernel, "the output's copy", out.copy, 8));
  OSPREY_CHECK(aligned(kernel, "the output's bf16 twin", out.twin, 4));
  return aligned(kernel, "the output's column sums", out.sums, 8);
}
}  // namespace flash_detail

// out (B, T, C; with its copy and twin where out names them) and lse (B, NH, T) from qkv (B, T, 3C);
// flashFits(B, C, NH) holds. K: Tf32Tiles or Bf16Tiles, the kind of operand the products read
// (Bf16Tiles reads the sources' bf16 twins, which must be given).
template <class K>
osprey::Result<void> flashAttentionForward(cudaStream_t stream, TileSource qkv, OutputPlaces out, float* lse,
                                           osprey::Index B, osprey::Index T, osprey::Index C, osprey::Index NH) {
  if (B == 0 || T == 0) return {};
  OSPREY_CHECK(flash_detail::tilesAligned<K>("flashForward", "qkv", qkv));
  OSPREY_CHECK(flash_detail::placesAligned("flashForward", out));
  OSPREY_CHECK(flash_detail::aligned("flashForward", "lse", lse, 4));
  OSPREY_CUDA_CHECK(allowShared(flashForward<K>, kFlashForwardShared<K>), "flash attention: shared memory");
  const unsigned tiles = flash_detail::tiles(T, kFlashTile * K::kForwardRows);
  flashForward<K><<<dim3(tiles, static_cast<unsigned>(B * NH)), kFlashThreads,
                    kFlashForwardShared<K>, stream>>>(qkv, out, lse, static_cast<int>(T), static_cast<int>(C),
                                                      static_cast<int>(NH), flash_detail::scaleLog2());
  OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention launch");
  return {};
}

// rowDot (B, NH, T), the backward's Drow, from dout and the forward's out (B, T, C), and dout's
// bf16 twin where `doutTwin` is given: the backward's first launch, before flashAttentionBackward.
inline osprey::Result<void> flashRowDotsOf(cudaStream_t stream, const float* dout, const float* out, float* rowDot,
                                           __nv_bfloat16* doutTwin, osprey::Index B, osprey::Index T,
                                           osprey::Index C, osprey::Index NH) {
  if (B == 0 || T == 0) return {};
  OSPREY_CHECK(flash_detail::aligned("flashRowDots", "dout", dout, 8));
  OSPREY_CHECK(flash_detail::aligned("flashRowDots", "the forward's output", out, 8));
  OSPREY_CHECK(flash_detail::aligned("flashRowDots", "dout's bf16 twin", doutTwin, 4));
  const osprey::Index dots = B * T * NH;
  flashRowDots<<<static_cast<unsigned>((dots + 7) / 8), 256, 0, stream>>>(
      dout, out, rowDot, dots, static_cast<int>(T), static_cast<int>(C), static_cast<int>(NH), doutTwin);
  OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention backward: row dots launch");
  return {};
}

// The uint32 words of the dsᵀ tiles the bf16 backward hands from its keys kernel to its queries
// kernel: B·NH heads × tiles·(tiles + 1)/2 tile pairs × 2048 (for GPT-2 124M at B16 T1024, 214 MB,
// held only while the backward runs).
inline osprey::Index flashDsWords(osprey::Index B, osprey::Index T, osprey::Index NH) {
  const osprey::Index tiles = flash_detail::tiles(T);
  return B * NH * (tiles * (tiles + 1) / 2) * kDsTileWords;
}

// dqkv (B, T, 3C; with its twin where dqkv names one, and its warps' column sums where dqkv.sums
// does: warpSumRows(B, T) rows of 3C) from dout, qkv, the forward's lse and rowDot
// (flashRowDotsOf's). With bf16 tiles, `dsT` (flashDsWords) carries ds from the keys kernel to
// dq's; without it (TF32 tiles) dq's kernel computes ds again.
template <class K>
osprey::Result<void> flashAttentionBackward(cudaStream_t stream, TileSource dout, TileSource qkv, const float* lse,
                                            const float* rowDot, OutputPlaces dqkv, osprey::Index B, osprey::Index T,
                                            osprey::Index C, osprey::Index NH, std::uint32_t* dsT = nullptr) {
  if (B == 0 || T == 0) return {};
  OSPREY_CHECK(flash_detail::tilesAligned<K>("flashBackwardKeys", "qkv", qkv));
  OSPREY_CHECK(flash_detail::tilesAligned<K>("flashBackwardKeys", "dout", dout));
  OSPREY_CHECK(flash_detail::placesAligned("flashBackwardKeys", dqkv));
  OSPREY_CHECK(flash_detail::aligned("flashBackwardKeys", "lse", lse, 4));
  OSPREY_CHECK(flash_detail::aligned("flashBackwardKeys", "the row dots", rowDot, 4));
  if (K::kHeldA) OSPREY_CHECK(flash_detail::aligned("flashBackwardQueriesFromDs", "the dsT scratch", dsT, 16));
  const int Ti = static_cast<int>(T), Ci = static_cast<int>(C), NHi = static_cast<int>(NH);
  const dim3 grid(flash_detail::tiles(T), static_cast<unsigned>(B * NH));
  OSPREY_CUDA_CHECK(allowShared(flashBackwardKeys<K>, kFlashKeysShared<K>), "flash attention backward: shared memory");
  flashBackwardKeys<K><<<grid, kFlashThreads, kFlashKeysShared<K>, stream>>>(
      qkv, dout, lse, rowDot, dqkv, Ti, Ci, NHi, flash_detail::scaleLog2(), flash_detail::scale(),
      K::kHeldA ? dsT : nullptr);
  OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention backward: keys launch");
  if (K::kHeldA && dsT) {
    flashBackwardQueriesFromDs<<<grid, kFlashThreads, kFlashQueriesFromDsShared, stream>>>(qkv, dsT, dqkv, Ti, Ci, NHi,
                                                                                         flash_detail::scale());
    OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention backward: queries launch");
    return {};
  }
  OSPREY_CUDA_CHECK(allowShared(flashBackwardQueries<K>, kFlashQueriesShared<K>),
                    "flash attention backward: shared memory");
  flashBackwardQueries<K><<<grid, kFlashThreads, kFlashQueriesShared<K>, stream>>>(
      qkv, dout, lse, rowDot, dqkv, Ti, Ci, NHi, flash_detail::scaleLog2(), flash_detail::scale());
  OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention backward: queries launch");
  return {};
}

}  // namespace gpt2::fast_kernels
