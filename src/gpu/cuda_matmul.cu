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
// Few columns (cols <= 8, as when decoding one token: the model multiplies weightᵀ by the token's
// column) and few rows (rows <= 8) take kernels of their own, built to stream the large operand
// once; each output is still one thread's chain in k order, rounded the same way.
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

// Where product z of a batch starts, relative to product 0: out, a and b advance by these many
// elements per product (all zero for a single product).
struct Batching {
  Index out = 0, a = 0, b = 0;
};

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(Tiling<BM, BN, BK, TM, TN>::kThreads)
    exactMatMulKernel(double* __restrict__ out, const double* __restrict__ a, const double* __restrict__ b,
                      Index rows, Index inner, Index cols, Batching batching) {
  using T = Tiling<BM, BN, BK, TM, TN>;
  // Product blockIdx.z of a batch: its operands and result lie a fixed stride further on.
  const Index z = blockIdx.z;
  out += z * batching.out;
  a += z * batching.a;
  b += z * batching.b;
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

// Products with few columns: out (rows x cols) = a (rows x inner) * b (inner x cols), cols <= 8.
// This is the shape of one-token decoding: the model computes x · W as Wᵀ · xᵀ (gpt2/model.hpp),
// so a weight matrix held transposed (OC x IC) is `a` and the token's activations, one column
// per token, are `b`. Two things bound it: streaming `a` once (2 FLOPs per 8 bytes), and each
// output being one sequential chain of `inner` dependent additions (8 cycles each on an H200, so
// 3072 of them take 12 µs however the rest is arranged). The kernel is built so that the chain
// is all that is left:
//   * rows are spread thin: a block owns only Rows rows, so a 768-row weight is 192 blocks, not
//     24 (with 32-row blocks, each multiprocessor pulled 786 KB with 16 KB in flight);
//   * warp 0 adds; warps 1-3 copy kNarrowSlice elements of the block's rows per stage (a warp
//     copies 32 consecutive k of one row) Stages - 1 stages ahead, and, for one column,
//     also form the products a[i][k] * b[k] in place, one stage ahead of the additions;
//   * lanes r < Rows of warp 0 then only load products (16 at a time, two per 16-byte load)
//     and add them, k ascending.
// Every output is still (0.0 + a[i][0]*b[0][j]) + a[i][1]*b[1][j] + ..., each product and each
// sum rounded once, in k order: the host's chain, bit for bit. With several columns the adding
// lanes form the products themselves (their Cols chains interleave, which hides the latency).
constexpr int kNarrowCols = 8;      // at most this many columns take this path
constexpr int kNarrowThreads = 128;  // warp 0 adds; warps 1-3 copy (and multiply)
constexpr int kNarrowCopiers = kNarrowThreads - 32;
constexpr int kNarrowSlice = 1024;   // elements of `a` per stage: Rows x depth
constexpr int kNarrowStages = 4;     // stages in flight, or 3 when 3 hold the whole product
constexpr Index kNarrowTallRows = 16384;  // from here on, 16 rows per block
constexpr int kNarrowAddAhead = 16;  // products loaded ahead of their additions

template <int Cols, int Rows, int Stages>
struct Narrow {
  static constexpr int kDepth = kNarrowSlice / Rows;  // k per stage
  // Even (rows stay 16-byte aligned) and 4 banks apart: the adding lanes' 16-byte loads of their
  // own rows do not conflict.
  static constexpr int kLd = kDepth + 2;
  static constexpr int kStageA = Rows * kLd;
  static constexpr int kStageB = kDepth * Cols;
  static constexpr size_t kSharedBytes = sizeof(double) * Stages * (kStageA + kStageB);
  static_assert(kNarrowSlice % Rows == 0 && kDepth % 32 == 0, "a warp copies 32 consecutive k of one row");
  static_assert(Rows <= 32 && kNarrowCopiers % 32 == 0, "one warp adds, whole warps copy");
};

// Named barrier 1 joins the copying warps only (barrier 0 is __syncthreads).
__device__ __forceinline__ void copiersBarrier() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kNarrowCopiers) : "memory");
}

template <int Cols, int Rows, int Stages>
__global__ void __launch_bounds__(kNarrowThreads)
    narrowMatMulKernel(double* __restrict__ out, const double* __restrict__ a, const double* __restrict__ b,
                       Index rows, Index inner) {
  using N = Narrow<Cols, Rows, Stages>;
  extern __shared__ __align__(16) double narrowShared[];
  double* tileA = narrowShared;                                // [stage][r][k]: a[row0 + r][k0 + k]
  double* tileB = narrowShared + Stages * N::kStageA;  // [stage][k][j]: b[k0 + k][j]
  const int tid = static_cast<int>(threadIdx.x);
  const bool adder = tid < 32;
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
        const int r = e / N::kDepth, k = e % N::kDepth;
        const Index row = row0 + r, col = k0 + k;
        const bool valid = row < rows && col < inner;
        copyAsync(&tileA[s * N::kStageA + r * N::kLd + k], valid ? a + row * inner + col : a, valid);
      }
      // Rows k0 .. k0 + depth - 1 of b are one contiguous run of depth * Cols doubles.
      const int count = depthOf(t) * Cols;
      for (int e = ctid; e < N::kStageB; e += kNarrowCopiers) {
        const bool valid = e < count;
        copyAsync(&tileB[s * N::kStageB + e], valid ? b + k0 * Cols + e : b, valid);
      }
    }
    commitCopies();
  };
  // Copiers: once slice t has landed (every copier's part), and with one column, replace each
  // a[i][k] by the product a[i][k] * b[k], rounded as the adding loop would round it.
  auto landSlice = [&](Index t) {
    waitCopies<Stages - 2>();
    copiersBarrier();
    if constexpr (Cols == 1) {
      if (t < slices) {
        const int s = static_cast<int>(t % Stages);
        for (int e = ctid; e < kNarrowSlice; e += kNarrowCopiers) {
          const int r = e / N::kDepth, k = e % N::kDepth;
          double* p = &tileA[s * N::kStageA + r * N::kLd + k];
          *p = __dmul_rn(*p, tileB[s * N::kStageB + k]);
        }
      }
    }
  };

  double acc[Cols];
#pragma unroll
  for (int j = 0; j < Cols; ++j) acc[j] = 0.0;

  if (!adder) {
    for (int p = 0; p < Stages - 1; ++p) copySlice(p);
    landSlice(0);  // waits until at most stages - 2 groups (slices 1 ..) are pending
  }
  __syncthreads();
  for (Index t = 0; t < slices; ++t) {
    const int s = static_cast<int>(t % Stages);
    if (!adder) {
      // Slice t + stages - 1 goes into the stage slice t - 1 used (the adders left it at the last
      // barrier); slice t + 1 is landed and multiplied while the adders walk slice t.
      copySlice(t + Stages - 1);
      landSlice(t + 1);
    } else if (tid < Rows) {
      const int depth = depthOf(t);
      const double* myRow = tileA + s * N::kStageA + tid * N::kLd;
      if constexpr (Cols == 1) {
        int k = 0;
        for (; k + kNarrowAddAhead <= depth; k += kNarrowAddAhead) {
          double2 v[kNarrowAddAhead / 2];
#pragma unroll
          for (int q = 0; q < kNarrowAddAhead / 2; ++q) v[q] = reinterpret_cast<const double2*>(myRow + k)[q];
#pragma unroll
          for (int q = 0; q < kNarrowAddAhead / 2; ++q) {
            acc[0] = __dadd_rn(acc[0], v[q].x);
            acc[0] = __dadd_rn(acc[0], v[q].y);
          }
        }
        for (; k < depth; ++k) acc[0] = __dadd_rn(acc[0], myRow[k]);
      } else {
        const double* bs = tileB + s * N::kStageB;
#pragma unroll 4
        for (int k = 0; k < depth; ++k) {
          const double av = myRow[k];
#pragma unroll
          for (int j = 0; j < Cols; ++j) acc[j] = __dadd_rn(acc[j], __dmul_rn(av, bs[k * Cols + j]));
        }
      }
    }
    __syncthreads();
  }
  const Index row = row0 + tid;
  if (tid < Rows && row < rows) {
#pragma unroll
    for (int j = 0; j < Cols; ++j) out[row * Cols + j] = acc[j];
  }
}

template <int Cols, int Rows, int Stages = kNarrowStages>
cudaError_t launchNarrowRows(double* out, const double* a, const double* b, Index rows, Index inner) {
  using N = Narrow<Cols, Rows, Stages>;
  // More than the default 48 KB of dynamic shared memory needs the kernel's consent, asked once.
  static const cudaError_t optIn = cudaFuncSetAttribute(
      narrowMatMulKernel<Cols, Rows, Stages>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(N::kSharedBytes));
  if (optIn != cudaSuccess) return optIn;
  narrowMatMulKernel<Cols, Rows, Stages>
      <<<static_cast<unsigned>((rows + Rows - 1) / Rows), kNarrowThreads, N::kSharedBytes>>>(out, a, b, rows, inner);
  return cudaGetLastError();
}

template <int Cols>
cudaError_t launchNarrow(double* out, const double* a, const double* b, Index rows, Index inner) {
  if (rows >= kNarrowTallRows) return launchNarrowRows<Cols, 16>(out, a, b, rows, inner);
  // Three stages hold a 768-deep product whole (3 x 256): 31 KB of shared memory a block instead
  // of 41, so a 3072-row weight's 768 blocks are resident at once (7 a multiprocessor, not 5).
  if (inner <= 3 * Narrow<Cols, 4, 3>::kDepth) return launchNarrowRows<Cols, 4, 3>(out, a, b, rows, inner);
  return launchNarrowRows<Cols, 4>(out, a, b, rows, inner);
}

// Products with few rows: out (rows x cols), rows <= 8 (a row vector times a matrix). The mirror
// image of the kernel above: here b (inner x cols) is the large operand, and a block of
// kFewRowsCols threads owns that many columns, one column per thread and every row of it in
// registers. Slices of b (each of its rows contiguous across the block's columns, so the copies
// coalesce) and of a stream through shared memory kFewRowsStages - 1 slices ahead; each thread
// reads its own column of the b slice (consecutive threads, consecutive addresses) and the a
// values every thread shares (a broadcast).
constexpr int kFewRows = 8;         // at most this many rows take this path
constexpr int kFewRowsCols = 64;    // columns (= threads) per block
constexpr int kFewRowsDepth = 16;   // k per slice
constexpr int kFewRowsStages = 4;   // slices in flight

template <int Rows>
__global__ void __launch_bounds__(kFewRowsCols)
    fewRowsMatMulKernel(double* __restrict__ out, const double* __restrict__ a, const double* __restrict__ b,
                        Index inner, Index cols) {
  __shared__ __align__(16) double tileA[kFewRowsStages][Rows][kFewRowsDepth];         // a[r][k0 + k]
  __shared__ __align__(16) double tileB[kFewRowsStages][kFewRowsDepth][kFewRowsCols];  // b[k0 + k][col0 + n]
  const int tid = static_cast<int>(threadIdx.x);
  const Index col0 = static_cast<Index>(blockIdx.x) * kFewRowsCols;

  auto copySlice = [&](int s, Index k0, bool any) {
    if (any) {
#pragma unroll
      for (int k = 0; k < kFewRowsDepth; ++k) {
        const Index row = k0 + k, col = col0 + tid;
        const bool valid = row < inner && col < cols;
        copyAsync(&tileB[s][k][tid], valid ? b + row * cols + col : b, valid);
      }
      for (int e = tid; e < Rows * kFewRowsDepth; e += kFewRowsCols) {
        const int r = e / kFewRowsDepth, k = e % kFewRowsDepth;
        const bool valid = k0 + k < inner;
        copyAsync(&tileA[s][r][k], valid ? a + r * inner + k0 + k : a, valid);
      }
    }
    commitCopies();
  };

  double acc[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) acc[r] = 0.0;
  const Index slices = (inner + kFewRowsDepth - 1) / kFewRowsDepth;
#pragma unroll
  for (int p = 0; p < kFewRowsStages - 1; ++p) copySlice(p, p * kFewRowsDepth, p < slices);
  for (Index t = 0; t < slices; ++t) {
    const Index next = t + kFewRowsStages - 1;
    copySlice(static_cast<int>(next % kFewRowsStages), next * kFewRowsDepth, next < slices);
    waitCopies<kFewRowsStages - 1>();
    __syncthreads();
    const int s = static_cast<int>(t % kFewRowsStages);
    const Index left = inner - t * kFewRowsDepth;
    const int depth = left < kFewRowsDepth ? static_cast<int>(left) : kFewRowsDepth;
    for (int k = 0; k < depth; ++k) {
      const double bv = tileB[s][k][tid];
#pragma unroll
      for (int r = 0; r < Rows; ++r) acc[r] = __dadd_rn(acc[r], __dmul_rn(tileA[s][r][k], bv));
    }
    __syncthreads();
  }
  const Index col = col0 + tid;
  if (col < cols) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) out[r * cols + col] = acc[r];
  }
}

template <int Rows>
cudaError_t launchFewRows(double* out, const double* a, const double* b, Index inner, Index cols) {
  fewRowsMatMulKernel<Rows><<<static_cast<unsigned>((cols + kFewRowsCols - 1) / kFewRowsCols), kFewRowsCols>>>(
      out, a, b, inner, cols);
  return cudaGetLastError();
}

// Launch one tiling over the whole product, or over `batch` products of the same shape lying one
// after another (grid z). The grid's y and z extents are capped at 65535 blocks, so very tall
// products go in bands of rows, and very long batches in runs of products.
template <int BM, int BN, int BK, int TM, int TN>
cudaError_t launchTiled(double* out, const double* a, const double* b, Index rows, Index inner, Index cols,
                        Index batch = 1) {
  using T = Tiling<BM, BN, BK, TM, TN>;
  constexpr Index kMaxBlocksYZ = 65535;
  const Index colBlocks = (cols + BN - 1) / BN;
  const Batching batching{rows * cols, rows * inner, inner * cols};
  for (Index first = 0; first < batch; first += kMaxBlocksYZ) {
    const Index run = batch - first < kMaxBlocksYZ ? batch - first : kMaxBlocksYZ;
    double* runOut = out + first * batching.out;
    const double* runA = a + first * batching.a;
    const double* runB = b + first * batching.b;
    for (Index band = 0; band < rows; band += kMaxBlocksYZ * BM) {
      const Index bandRows = rows - band < kMaxBlocksYZ * BM ? rows - band : kMaxBlocksYZ * BM;
      const dim3 grid(static_cast<unsigned>(colBlocks), static_cast<unsigned>((bandRows + BM - 1) / BM),
                      static_cast<unsigned>(run));
      exactMatMulKernel<BM, BN, BK, TM, TN><<<grid, T::kThreads>>>(runOut + band * cols, runA + band * inner, runB,
                                                                    bandRows, inner, cols, batching);
      const cudaError_t status = cudaGetLastError();
      if (status != cudaSuccess) return status;
    }
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t launchExactMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                              Index cols, int multiprocessors) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  // Few columns (decoding: weightᵀ times one token's column), then few rows; a product that is
  // small both ways takes whichever kernel has more parallel outputs per launch.
  if (cols <= kNarrowCols && cols < rows) {
    switch (cols) {
      case 1: return launchNarrow<1>(out, a, b, rows, inner);
      case 2: return launchNarrow<2>(out, a, b, rows, inner);
      case 3: return launchNarrow<3>(out, a, b, rows, inner);
      case 4: return launchNarrow<4>(out, a, b, rows, inner);
      case 5: return launchNarrow<5>(out, a, b, rows, inner);
      case 6: return launchNarrow<6>(out, a, b, rows, inner);
      case 7: return launchNarrow<7>(out, a, b, rows, inner);
      default: return launchNarrow<8>(out, a, b, rows, inner);
    }
  }
  if (rows <= kFewRows) {
    switch (rows) {
      case 1: return launchFewRows<1>(out, a, b, inner, cols);
      case 2: return launchFewRows<2>(out, a, b, inner, cols);
      case 3: return launchFewRows<3>(out, a, b, inner, cols);
      case 4: return launchFewRows<4>(out, a, b, inner, cols);
      case 5: return launchFewRows<5>(out, a, b, inner, cols);
      case 6: return launchFewRows<6>(out, a, b, inner, cols);
      case 7: return launchFewRows<7>(out, a, b, inner, cols);
      default: return launchFewRows<8>(out, a, b, inner, cols);
    }
  }
  // Large products: 128 x 128 tiles, 8 x 8 outputs per thread (the most reuse of each shared-memory
  // read). When that leaves multiprocessors idle, 64 x 64 tiles with 4 x 4 per thread spread the
  // same product over four times as many blocks.
  const Index largeBlocks = ((rows + 127) / 128) * ((cols + 127) / 128);
  if (largeBlocks >= multiprocessors) return launchTiled<128, 128, 8, 8, 8>(out, a, b, rows, inner, cols);
  // Narrower still (an attention head's 1024 x 1024 x 64 products: 16 blocks of 64 x 64), 32 x 32
  // tiles with 2 x 2 per thread give four times as many blocks again.
  const Index mediumBlocks = ((rows + 63) / 64) * ((cols + 63) / 64);
  if (mediumBlocks >= multiprocessors / 2) return launchTiled<64, 64, 8, 4, 4>(out, a, b, rows, inner, cols);
  return launchTiled<32, 32, 8, 2, 2>(out, a, b, rows, inner, cols);
}

// `batch` products of one shape, product z being out_z = a_z * b_z with a_z at a + z·rows·inner,
// b_z at b + z·inner·cols and out_z at out + z·rows·cols (attention's per-head products). Each
// output is the single product's exact sum, so the batch equals `batch` calls of
// launchExactMatMul bit for bit; large enough shapes go to one launch of a tiling (grid z), and
// shapes that take the few-rows or few-columns kernels are launched product by product.
cudaError_t launchExactMatMulBatched(Scalar* out, const Scalar* a, const Scalar* b, Index batch, Index rows,
                                     Index inner, Index cols, int multiprocessors) {
  if (batch == 0 || rows == 0 || cols == 0) return cudaSuccess;
  if (batch == 1 || rows <= kFewRows || (cols <= kNarrowCols && cols < rows)) {
    for (Index z = 0; z < batch; ++z) {
      const cudaError_t status = launchExactMatMul(out + z * rows * cols, a + z * rows * inner,
                                                   b + z * inner * cols, rows, inner, cols, multiprocessors);
      if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
  }
  // The same choice as for one product, counting the blocks of the whole batch.
  const Index largeBlocks = batch * ((rows + 127) / 128) * ((cols + 127) / 128);
  if (largeBlocks >= multiprocessors && cols >= 128) return launchTiled<128, 128, 8, 8, 8>(out, a, b, rows, inner, cols, batch);
  const Index mediumBlocks = batch * ((rows + 63) / 64) * ((cols + 63) / 64);
  if (mediumBlocks >= multiprocessors / 2) return launchTiled<64, 64, 8, 4, 4>(out, a, b, rows, inner, cols, batch);
  return launchTiled<32, 32, 8, 2, 2>(out, a, b, rows, inner, cols, batch);
}

}  // namespace osprey
