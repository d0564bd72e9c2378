// The exact product's kernel for few columns (decoding's weightᵀ times one token) and, mirrored,
// few rows (a bias gradient): src/gpu/cuda/matmul.cu launches it for the device's matMul, and a
// derived operation may launch it with its own store of the outputs (gpt2/cuda/linear_row.hpp:
// a decoded row's bias and residual in the product's own kernel).
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/narrow_matmul.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <cstddef>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/kernels/async_copy.hpp"

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

// Products with few columns: out (rows x cols) = a (rows x inner) * b (inner x cols), cols <= 8.
// This is the shape of one-token decoding: the model computes x · W as Wᵀ · xᵀ (gpt2/model/model.hpp),
// so a weight matrix held transposed (OC x IC) is `a` and the token's activations, one column
// per token, are `b`. Two things bound it: streaming `a` once (2 FLOPs per 8 bytes), and each
// output being one sequential chain of `inner` dependent fused multiply-adds (about 8 cycles each
// on an H200, so 3072 of them take 12 µs however the rest is arranged). The kernel is built so
// that the chain is all that is left:
//   * rows are spread thin: a block owns only Rows rows, so a 768-row weight is 192 blocks, not
//     24 (with 32-row blocks, each multiprocessor pulled 786 KB with 16 KB in flight);
//   * warp 0 computes; warps 1-3 copy kNarrowSlice elements of the block's rows per stage, and the
//     matching rows of b, Stages - 1 stages ahead;
//   * lanes r < Rows of warp 0 walk their row of the stage, k ascending, with the next group of
//     operands already loaded from shared memory while the current group's fmas run.
// Every output is acc = fma(a[i][k], b[k][j], acc) from +0.0, k ascending: the contract's chain.
// With several columns a lane's Cols chains interleave, which hides the latency.
//
// The same kernel takes products with few rows (rows <= 8: a bias gradient is ones(1 x N) times
// the output gradient (N x cols)) as their mirror image, outᵀ = bᵀ · aᵀ: the large operand's
// columns are the kernel's rows (Mirror): element (row, k) of the kernel's `a` is b[k][row], so
// a stage's copy walks a block's Rows neighbouring columns across its k (Rows doubles contiguous
// a k); element (k, j) of its `b` is a[j][k], and output (row, j) is out[j][row]. fma is
// commutative in its product, so each output is the same chain as the plain product's.
constexpr int kNarrowCols = 8;      // at most this many columns take this path
constexpr int kNarrowThreads = 128;  // warp 0 computes; warps 1-3 copy
constexpr int kNarrowCopiers = kNarrowThreads - 32;
constexpr int kNarrowSlice = 1024;   // elements of `a` per stage: Rows x depth
constexpr int kNarrowStages = 4;     // stages in flight, or 3 when 3 hold the whole product
constexpr Index kNarrowTallRows = 16384;  // from here on, 16 rows per block
constexpr int kNarrowAhead = 16;     // k per group of operands loaded ahead (one column)

enum class NarrowLayout { Plain, Mirror };

template <int Cols, int Rows, int Stages>
struct Narrow {
  static constexpr int kDepth = kNarrowSlice / Rows;  // k per stage
  // Even (rows stay 16-byte aligned) and 4 banks apart: the computing lanes' 16-byte loads of their
  // own rows do not conflict.
  static constexpr int kLd = kDepth + 2;
  static constexpr int kStageA = Rows * kLd;
  static constexpr int kStageB = kDepth * Cols;
  static constexpr size_t kSharedBytes = sizeof(double) * Stages * (kStageA + kStageB);
  static_assert(kNarrowSlice % Rows == 0 && kDepth % 32 == 0, "a warp copies 32 consecutive k of one row");
  static_assert(kDepth % kNarrowAhead == 0, "whole groups per full stage");
  static_assert(Rows <= 32 && kNarrowCopiers % 32 == 0, "one warp computes, whole warps copy");
};

// rows, inner: the kernel's product (for Mirror, rows is the large operand's column count and
// Cols the few rows).
template <int Cols, int Rows, int Stages, NarrowLayout Layout, class Store>
__global__ void __launch_bounds__(kNarrowThreads)
    narrowMatMulKernel(Store store, const double* __restrict__ a, const double* __restrict__ b, Index rows,
                       Index inner) {
  using N = Narrow<Cols, Rows, Stages>;
  constexpr bool kMirror = Layout == NarrowLayout::Mirror;
  extern __shared__ __align__(16) double narrowShared[];
  double* tileA = narrowShared;                        // [stage][r][k]: a[row0 + r][k0 + k]
  double* tileB = narrowShared + Stages * N::kStageA;  // [stage][k][j]: b[k0 + k][j]
  const int tid = static_cast<int>(threadIdx.x);
  const bool computes = tid < 32;
  const int ctid = tid - 32;  // copier index, for warps 1-3
  const Index row0 = static_cast<Index>(blockIdx.x) * Rows;
  const Index slices = (inner + N::kDepth - 1) / N::kDepth;
  auto depthOf = [&](Index t) {
    const Index left = inner - t * N::kDepth;
    return left < N::kDepth ? static_cast<int>(left) : N::kDepth;
  };

  // Copiers: queue the copies of slice t into its stage (always one commit group, possibly empty,
  // so the waits can count groups).
  auto copySlice = [&](Index t) {
    if (t < slices) {
      const int s = static_cast<int>(t % Stages);
      const Index k0 = t * N::kDepth;
      for (int e = ctid; e < kNarrowSlice; e += kNarrowCopiers) {
        // Neighbouring copiers read neighbouring addresses: along a row of `a` (32 consecutive k a
        // warp), or, mirrored, across the block's Rows columns of the large operand at one k.
        const int r = kMirror ? e % Rows : e / N::kDepth, k = kMirror ? e / Rows : e % N::kDepth;
        const Index row = row0 + r, col = k0 + k;
        const bool valid = row < rows && col < inner;
        const double* from = kMirror ? a + col * rows + row : a + row * inner + col;
        copyAsync<8>(&tileA[s * N::kStageA + r * N::kLd + k], valid ? from : a, valid);
      }
      const int count = depthOf(t) * Cols;
      for (int e = ctid; e < N::kStageB; e += kNarrowCopiers) {
        const bool valid = e < count;
        // Rows k0 .. k0 + depth - 1 of b are one contiguous run of depth * Cols doubles; mirrored,
        // b[k][j] is the few-rows operand's a[j][k].
        const double* from = kMirror ? b + (e % Cols) * inner + k0 + e / Cols : b + k0 * Cols + e;
        copyAsync<8>(&tileB[s * N::kStageB + e], valid ? from : b, valid);
      }
    }
    commitCopies();
  };

  double acc[Cols];
#pragma unroll
  for (int j = 0; j < Cols; ++j) acc[j] = 0.0;

  if (!computes) {
    for (int p = 0; p < Stages - 1; ++p) copySlice(p);
    waitCopies<Stages - 2>();  // this copier's part of slice 0 has landed
  }
  __syncthreads();  // every copier's part of slice 0 has landed
  for (Index t = 0; t < slices; ++t) {
    const int s = static_cast<int>(t % Stages);
    if (!computes) {
      // Slice t + stages - 1 goes into the stage slice t - 1 used (the computing lanes left it at
      // the last barrier); slice t + 1 lands while the computing lanes walk slice t.
      copySlice(t + Stages - 1);
      waitCopies<Stages - 2>();
    } else if (tid < Rows) {
      const int depth = depthOf(t);
      const double* myRow = tileA + s * N::kStageA + tid * N::kLd;
      const double* bs = tileB + s * N::kStageB;
      if constexpr (Cols == 1) {
        // Groups of kNarrowAhead k, two per 16-byte load (b's are the same address for every
        // lane: a broadcast); group g + 1 is loaded before group g's chain of fmas runs.
        constexpr int kPairs = kNarrowAhead / 2;
        const int groups = depth / kNarrowAhead;
        double2 av[kPairs], bv[kPairs];
        if (groups > 0) {
#pragma unroll
          for (int q = 0; q < kPairs; ++q) {
            av[q] = reinterpret_cast<const double2*>(myRow)[q];
            bv[q] = reinterpret_cast<const double2*>(bs)[q];
          }
        }
        for (int g = 0; g < groups; ++g) {
          double2 an[kPairs], bn[kPairs];
          const int next = (g + 1 < groups ? g + 1 : g) * kNarrowAhead;
#pragma unroll
          for (int q = 0; q < kPairs; ++q) {
            an[q] = reinterpret_cast<const double2*>(myRow + next)[q];
            bn[q] = reinterpret_cast<const double2*>(bs + next)[q];
          }
#pragma unroll
          for (int q = 0; q < kPairs; ++q) {
            acc[0] = __fma_rn(av[q].x, bv[q].x, acc[0]);
            acc[0] = __fma_rn(av[q].y, bv[q].y, acc[0]);
          }
#pragma unroll
          for (int q = 0; q < kPairs; ++q) {
            av[q] = an[q];
            bv[q] = bn[q];
          }
        }
        for (int k = groups * kNarrowAhead; k < depth; ++k) acc[0] = __fma_rn(myRow[k], bs[k], acc[0]);
      } else {
#pragma unroll 4
        for (int k = 0; k < depth; ++k) {
          const double av = myRow[k];
#pragma unroll
          for (int j = 0; j < Cols; ++j) acc[j] = __fma_rn(av, bs[k * Cols + j], acc[j]);
        }
      }
    }
    __syncthreads();  // slice t is walked; every copier's part of slice t + 1 has landed
  }
  const Index row = row0 + tid;
  if (tid < Rows && row < rows) {
#pragma unroll
    for (int j = 0; j < Cols; ++j) store(row, j, acc[j]);
  }
}

// Where the kernel leaves output (row, j) of the product: out (rows x Cols) as it is, or, mirrored,
// out (Cols x rows).
template <int Cols, NarrowLayout Layout>
struct StoreProduct {
  double* out;
  Index rows;
  __device__ void operator()(Index row, int j, double acc) const {
    if constexpr (Layout == NarrowLayout::Mirror) {
      out[j * rows + row] = acc;
    } else {
      out[row * Cols + j] = acc;
    }
  }
};

template <int Cols, int Rows, NarrowLayout Layout, int Stages = kNarrowStages, class Store>
cudaError_t launchNarrowRows(Store store, const double* a, const double* b, Index rows, Index inner,
                             cudaStream_t stream) {
  using N = Narrow<Cols, Rows, Stages>;
  static SharedMemoryOptIn once;
  if (const cudaError_t status = once.ensure(narrowMatMulKernel<Cols, Rows, Stages, Layout, Store>, N::kSharedBytes);
      status != cudaSuccess)
    return status;
  narrowMatMulKernel<Cols, Rows, Stages, Layout, Store>
      <<<static_cast<unsigned>((rows + Rows - 1) / Rows), kNarrowThreads, N::kSharedBytes, stream>>>(store, a, b, rows,
                                                                                                      inner);
  return cudaGetLastError();
}

// The product's chains, output (row, j) given to store(row, j, acc) (StoreProduct, or a derived
// operation's epilogue on a product's outputs: gpt2/cuda/linear_row.hpp).
template <int Cols, NarrowLayout Layout, class Store>
cudaError_t launchNarrow(Store store, const double* a, const double* b, Index rows, Index inner, cudaStream_t stream) {
  if (rows >= kNarrowTallRows) return launchNarrowRows<Cols, 16, Layout>(store, a, b, rows, inner, stream);
  // Mirrored, a block's copies read 8 columns (64 bytes) a k rather than 4 (32).
  if constexpr (Layout == NarrowLayout::Mirror) return launchNarrowRows<Cols, 8, Layout>(store, a, b, rows, inner, stream);
  // Three stages hold a 768-deep product whole (3 x 256): 31 KB of shared memory a block instead
  // of 41, so a 3072-row weight's 768 blocks are resident at once (7 a multiprocessor, not 5).
  if (inner <= 3 * Narrow<Cols, 4, 3>::kDepth) return launchNarrowRows<Cols, 4, Layout, 3>(store, a, b, rows, inner, stream);
  return launchNarrowRows<Cols, 4, Layout>(store, a, b, rows, inner, stream);
}

}  // namespace
}  // namespace osprey::cuda_detail
