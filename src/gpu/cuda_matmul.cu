// The cuda device's exact matMul: out (rows x cols) = a (rows x inner) * b (inner x cols), row-major.
//
// Contract (DESIGN.md §4), the same as src/gpu/host_matmul.cpp:
//   out[i][j] = (((0.0 + a[i][0]*b[0][j]) + a[i][1]*b[1][j]) + ...) + a[i][inner-1]*b[inner-1][j]
// one rounding per multiply and one per add, k ascending. The multiply and the add are written as
// __dmul_rn and __dadd_rn, which nvcc never contracts into a fused multiply-add, whatever -fmad
// says (the build also passes -fmad=false, so any stray `a * b + c` is not fused either).
//
// How it is fast without breaking that order: the output is cut into BM x BN tiles, one per thread
// block; each thread owns a TM x TN block of outputs held in registers. The k dimension is walked
// in BK-deep slices, ascending; a slice of a (BM x BK, stored transposed) and of b (BK x BN) is
// copied into shared memory with cp.async while the previous slice is being multiplied (two
// stages: double buffering). Within a slice every thread steps k upward and updates all its
// outputs for that k before moving on, so each output sees exactly the host's chain of roundings.
// Blocks, threads and registers only ever group *different* outputs; no output's sum is split.
//
// Few rows (rows <= 8, as when decoding one token) take a kernel of their own, with one output per
// thread and a deeper copy pipeline; the order of each output's sum is the same.
//
// Edges: copies that fall outside the matrices write zeros into shared memory (cp.async's
// zero-fill), and the last, partial k slice is walked only up to `inner`, so no padding value ever
// enters a sum. Outputs outside the matrix are computed on zeros and not stored.
#include <cuda_runtime.h>

#include "osprey/gpu/cuda.hpp"

namespace osprey {
namespace {

constexpr int kStages = 2;  // double buffering

// One tiling of the product: block tile BM x BN, k slice BK, TM x TN outputs per thread. A thread's
// outputs are interleaved in pairs across the tile (rows ty*2, ty*2+1, then 2*threadsY further on;
// columns likewise), so a warp's 16-byte shared-memory reads of b fall on consecutive addresses.
template <int BM, int BN, int BK, int TM, int TN>
struct Tiling {
  static constexpr int kThreadsX = BN / TN;
  static constexpr int kThreadsY = BM / TM;
  static constexpr int kThreads = kThreadsX * kThreadsY;
  // Transposed a tile: row k holds BM values of column k of a, padded by two doubles so the
  // transposing stores of one warp spread over the banks (and rows stay 16-byte aligned).
  static constexpr int kLdA = BM + 2;
  static constexpr int kLdB = BN;
  static constexpr int kCopiesA = BM * BK / kThreads;
  static constexpr int kCopiesB = BK * BN / kThreads;
  static_assert(TM % 2 == 0 && TN % 2 == 0, "outputs are interleaved in pairs");
  static_assert(BM * BK % kThreads == 0 && BK * BN % kThreads == 0, "copies divide evenly");

  __device__ static int rowOf(int ty, int i) { return (i / 2) * (2 * kThreadsY) + ty * 2 + (i % 2); }
  __device__ static int colOf(int tx, int j) { return (j / 2) * (2 * kThreadsX) + tx * 2 + (j % 2); }
};

// An 8-byte global -> shared copy that does not block; `valid == false` writes 0.0 and reads
// nothing (src-size 0), so `src` need only be a mapped address.
__device__ __forceinline__ void copyAsync(double* dst, const double* src, bool valid) {
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int srcBytes = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(shared), "l"(src), "r"(srcBytes)
               : "memory");
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(Tiling<BM, BN, BK, TM, TN>::kThreads)
    exactMatMulKernel(double* __restrict__ out, const double* __restrict__ a, const double* __restrict__ b,
                      Index rows, Index inner, Index cols) {
  using T = Tiling<BM, BN, BK, TM, TN>;
  __shared__ __align__(16) double tileA[kStages][BK][T::kLdA];  // tileA[s][k][m] = a[row0 + m][k0 + k]
  __shared__ __align__(16) double tileB[kStages][BK][T::kLdB];  // tileB[s][k][n] = b[k0 + k][col0 + n]

  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % T::kThreadsX, ty = tid / T::kThreadsX;
  const Index row0 = static_cast<Index>(blockIdx.y) * BM;
  const Index col0 = static_cast<Index>(blockIdx.x) * BN;

  // Start copying slice k0 of a and b into stage s. Consecutive threads copy consecutive k of a
  // row of a, and consecutive columns of a row of b, so global reads coalesce.
  auto copySlice = [&](int s, Index k0) {
#pragma unroll
    for (int c = 0; c < T::kCopiesA; ++c) {
      const int e = tid + c * T::kThreads;
      const int m = e / BK, k = e % BK;
      const Index row = row0 + m, col = k0 + k;
      const bool valid = row < rows && col < inner;
      copyAsync(&tileA[s][k][m], valid ? a + row * inner + col : a, valid);
    }
#pragma unroll
    for (int c = 0; c < T::kCopiesB; ++c) {
      const int e = tid + c * T::kThreads;
      const int k = e / BN, n = e % BN;
      const Index row = k0 + k, col = col0 + n;
      const bool valid = row < inner && col < cols;
      copyAsync(&tileB[s][k][n], valid ? b + row * cols + col : b, valid);
    }
    commitCopies();
  };

  double acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

  // acc[i][j] = acc[i][j] + a[i][k] * b[k][j] for k = 0 .. depth-1 of stage s, k ascending.
  auto multiplySlice = [&](int s, int depth) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k < depth) {
        double av[TM], bv[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 2) {
          const double2 pair = *reinterpret_cast<const double2*>(&tileA[s][k][T::rowOf(ty, i)]);
          av[i] = pair.x;
          av[i + 1] = pair.y;
        }
#pragma unroll
        for (int j = 0; j < TN; j += 2) {
          const double2 pair = *reinterpret_cast<const double2*>(&tileB[s][k][T::colOf(tx, j)]);
          bv[j] = pair.x;
          bv[j + 1] = pair.y;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = __dadd_rn(acc[i][j], __dmul_rn(av[i], bv[j]));
      }
    }
  };

  const Index slices = (inner + BK - 1) / BK;
  if (slices > 0) copySlice(0, 0);
  for (Index t = 0; t < slices; ++t) {
    const int s = static_cast<int>(t % kStages);
    if (t + 1 < slices) {
      copySlice(s ^ 1, (t + 1) * BK);  // the next slice streams in while this one is multiplied
      waitCopies<1>();
    } else {
      waitCopies<0>();
    }
    __syncthreads();
    const Index left = inner - t * BK;
    multiplySlice(s, left < BK ? static_cast<int>(left) : BK);
    __syncthreads();  // everyone is done with stage s before it is refilled
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const Index row = row0 + T::rowOf(ty, i);
    if (row >= rows) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const Index col = col0 + T::colOf(tx, j);
      if (col < cols) out[row * cols + col] = acc[i][j];
    }
  }
}

// Products with few rows (decoding: one token's activations times a weight matrix). A tiling
// built for square products would leave most of each tile empty and stream b through too few
// blocks; here a block owns kSkinnyCols columns, every thread one output (row tid / kSkinnyCols,
// column tid % kSkinnyCols), and all 256 threads stream the block's panel of b through a four-stage
// cp.async pipeline, so many loads are in flight while each output's k-ordered chain runs.
constexpr int kSkinnyRows = 8;     // at most this many rows take this path
constexpr int kSkinnyCols = 32;    // columns per block: one warp per row reads 32 consecutive values
constexpr int kSkinnyDepth = 32;   // k per slice
constexpr int kSkinnyStages = 4;   // slices in flight
constexpr int kSkinnyThreads = kSkinnyRows * kSkinnyCols;

__global__ void __launch_bounds__(kSkinnyThreads)
    skinnyMatMulKernel(double* __restrict__ out, const double* __restrict__ a, const double* __restrict__ b,
                       Index rows, Index inner, Index cols) {
  __shared__ __align__(16) double tileA[kSkinnyStages][kSkinnyRows][kSkinnyDepth];  // a[r][k0 + k]
  __shared__ __align__(16) double tileB[kSkinnyStages][kSkinnyDepth][kSkinnyCols];  // b[k0 + k][col0 + n]
  const int tid = static_cast<int>(threadIdx.x);
  const Index col0 = static_cast<Index>(blockIdx.x) * kSkinnyCols;

  // Start copying slice k0 into stage s (always commits one group, possibly empty, so the
  // wait below can count groups).
  auto copySlice = [&](int s, Index k0, bool any) {
    if (any) {
#pragma unroll
      for (int c = 0; c < kSkinnyDepth * kSkinnyCols / kSkinnyThreads; ++c) {
        const int e = tid + c * kSkinnyThreads;
        const int k = e / kSkinnyCols, n = e % kSkinnyCols;
        const Index row = k0 + k, col = col0 + n;
        const bool valid = row < inner && col < cols;
        copyAsync(&tileB[s][k][n], valid ? b + row * cols + col : b, valid);
      }
      static_assert(kSkinnyRows * kSkinnyDepth == kSkinnyThreads, "one copy of a per thread");
      const int r = tid / kSkinnyDepth, k = tid % kSkinnyDepth;
      const bool valid = r < rows && k0 + k < inner;
      copyAsync(&tileA[s][r][k], valid ? a + r * inner + k0 + k : a, valid);
    }
    commitCopies();
  };

  const int myRow = tid / kSkinnyCols, myCol = tid % kSkinnyCols;
  double acc = 0.0;
  const Index slices = (inner + kSkinnyDepth - 1) / kSkinnyDepth;
#pragma unroll
  for (int p = 0; p < kSkinnyStages - 1; ++p) copySlice(p, p * kSkinnyDepth, p < slices);
  for (Index t = 0; t < slices; ++t) {
    // Slice t + 3 goes into the stage slice t - 1 used (everyone left it at the last barrier).
    const Index next = t + kSkinnyStages - 1;
    copySlice(static_cast<int>(next % kSkinnyStages), next * kSkinnyDepth, next < slices);
    waitCopies<kSkinnyStages - 1>();  // slice t has landed
    __syncthreads();
    const int s = static_cast<int>(t % kSkinnyStages);
    const Index left = inner - t * kSkinnyDepth;
    const int depth = left < kSkinnyDepth ? static_cast<int>(left) : kSkinnyDepth;
    for (int k = 0; k < depth; ++k) acc = __dadd_rn(acc, __dmul_rn(tileA[s][myRow][k], tileB[s][k][myCol]));
    __syncthreads();
  }
  const Index col = col0 + myCol;
  if (myRow < rows && col < cols) out[myRow * cols + col] = acc;
}

// Launch one tiling over the whole product. The grid's y extent is capped at 65535 blocks, so
// very tall products go in bands of rows.
template <int BM, int BN, int BK, int TM, int TN>
cudaError_t launchTiled(double* out, const double* a, const double* b, Index rows, Index inner, Index cols) {
  using T = Tiling<BM, BN, BK, TM, TN>;
  constexpr Index kMaxBlocksY = 65535;
  const Index colBlocks = (cols + BN - 1) / BN;
  for (Index band = 0; band < rows; band += kMaxBlocksY * BM) {
    const Index bandRows = rows - band < kMaxBlocksY * BM ? rows - band : kMaxBlocksY * BM;
    const dim3 grid(static_cast<unsigned>(colBlocks), static_cast<unsigned>((bandRows + BM - 1) / BM));
    exactMatMulKernel<BM, BN, BK, TM, TN>
        <<<grid, T::kThreads>>>(out + band * cols, a + band * inner, b, bandRows, inner, cols);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t launchExactMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                              Index cols, int multiprocessors) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (rows <= kSkinnyRows) {
    skinnyMatMulKernel<<<static_cast<unsigned>((cols + kSkinnyCols - 1) / kSkinnyCols), kSkinnyThreads>>>(
        out, a, b, rows, inner, cols);
    return cudaGetLastError();
  }
  // Large products: 128 x 128 tiles, 8 x 8 outputs per thread (the most reuse of each shared-memory
  // read). When that leaves multiprocessors idle, 64 x 64 tiles with 4 x 4 per thread spread the
  // same product over four times as many blocks.
  const Index largeBlocks = ((rows + 127) / 128) * ((cols + 127) / 128);
  if (largeBlocks >= multiprocessors) return launchTiled<128, 128, 8, 8, 8>(out, a, b, rows, inner, cols);
  return launchTiled<64, 64, 8, 4, 4>(out, a, b, rows, inner, cols);
}

}  // namespace osprey
