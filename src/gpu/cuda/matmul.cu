// The cuda device's exact matMul: out (rows x cols) = a (rows x inner) * b (inner x cols), row-major.
//
// Contract (DESIGN.md §4), the same as lists and src/gpu/host/matmul.cpp:
//   acc = +0.0; for k = 0 .. inner-1: acc = fma(a[i][k], b[k][j], acc)
// one correctly rounded fused multiply-add per term, k ascending. The build passes -fmad=false, so
// the only fused operations are the ones written here: __fma_rn, and the FP64 tensor cores' DMMA.
//
// Large products run on the FP64 tensor cores (mma.sync m8n8k4 f64). One DMMA adds four terms to
// an 8 x 8 accumulator tile: D = C + A·B with A 8 x 4 and B 4 x 8. On the H200 it computes each
// element of D as the fma chain c, then a0·b0, a1·b1, a2·b2, a3·b3 in that order, each rounded
// once (measured bit for bit against std::fma chains on 17 million elements in five input regimes:
// docs/EXACTNESS.md; no document promises it, so tests/cuda/cuda_device_test.cu checks every shape
// the model uses). A chain of DMMAs into the same accumulator, k ascending four at a time, is therefore the
// contract's chain. Everything here keeps it that way:
//   * every output lives in one accumulator register of one thread from the first term to the
//     last; blocks, warps and tiles only ever group different outputs (no split or sliced k);
//   * k is walked in ascending slices (16 or 32 deep) by every warp of a block; within a slice,
//     DMMA steps of four k ascending;
//   * no padding term ever enters a real output: fma(0, 0, acc) is not the identity when acc is
//     -0.0 (an underflowed chain), so the k that do not fill a whole DMMA step (inner % 4 of them,
//     in the last slice) are added by each thread with __fma_rn, straight onto its accumulator
//     registers, in k order. Rows and columns beyond the matrix compute on zero-filled tiles and
//     are never stored.
//
// Few columns (cols <= 8: decoding multiplies weightᵀ by the token's column) and few rows
// (rows <= 8: a bias gradient) take a CUDA-core kernel of their own, few rows as its mirror image,
// built to stream the large operand once; each output is one thread's __fma_rn chain in k order. (A one-column kernel on the FP64 tensor cores,
// a warp per eight rows, was measured slower on every decoding shape: tools/profile/
// narrow_dmma_probe.cu, bench/RESULTS.md.)
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/cuda/exact_lt.hpp"
#include "osprey/gpu/cuda/kernels/async_copy.hpp"
#include "osprey/gpu/cuda/kernels/copy_blocks.hpp"
#include "osprey/gpu/cuda/kernels/narrow_matmul.hpp"

namespace osprey {
namespace {

// The asynchronous copies and the narrow kernel: osprey/gpu/cuda/kernels/.
using cuda_detail::commitCopies;
using cuda_detail::copyAsync;
using cuda_detail::kNarrowCols;
using cuda_detail::NarrowLayout;
using cuda_detail::SharedMemoryOptIn;
using cuda_detail::waitCopies;

// Where product z of a batch starts, relative to product 0: out, a and b advance by these many
// elements per product (all zero for a single product).
struct Batching {
  Index out = 0, a = 0, b = 0;
};

// ---- large products: the FP64 tensor cores ---------------------------------------------------------

// D = C + A·B on one 8 x 8 x 4 tile, the accumulator in place (c0, c1: this lane's two elements).
__device__ __forceinline__ void dmma(double& c0, double& c1, double a, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
      : "+d"(c0), "+d"(c1)
      : "d"(a), "d"(b));
}

constexpr int kStep = 4;  // k per DMMA

// One tiling of the product on the tensor cores. Each warp owns WarpTilesM x WarpTilesN DMMA tiles
// (8 x 8 outputs each); the block's WarpsM x WarpsN warps own a kBlockRows x kBlockCols tile of
// the output. Slices of a (kBlockRows x Depth) and b (Depth x kBlockCols) stream into shared
// memory Stages - 1 slices ahead of the DMMAs. Wide: inner and cols are even and every
// operand is 16-byte aligned, so copies and stores move two doubles at a time.
//
// The lane layouts are the PTX ISA's for mma.m8n8k4 with .f64 (ISA "Matrix Fragments for
// mma.m8n8k4 with .f64 floating point type"): A's element (row lane/4, k lane%4); B's (k lane%4,
// column lane/4); C and D's (row lane/4, columns 2·(lane%4) and 2·(lane%4) + 1).
template <int WarpTilesM, int WarpTilesN, int WarpsM, int WarpsN, int Depth, int Stages, int MinBlocks, bool Wide>
struct TensorTiling {
  static constexpr int kWarpRows = 8 * WarpTilesM;
  static constexpr int kWarpCols = 8 * WarpTilesN;
  static constexpr int kBlockRows = kWarpRows * WarpsM;
  static constexpr int kBlockCols = kWarpCols * WarpsN;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kDepth = Depth;  // k per slice
  static constexpr int kStages = Stages;
  static constexpr int kMinBlocks = MinBlocks;  // resident a multiprocessor: bounds the registers
  // Shared rows padded so that one fragment load (32 lanes, 8 bytes each) touches 32 different
  // bank pairs: a's 8 rows x 4 k with a row stride = 4 (mod 8) doubles, b's 4 k-rows x 8 columns
  // with a row stride = 8 (mod 16). Both strides are even, so rows stay 16-byte aligned.
  static constexpr int kLdA = Depth + 4;
  static constexpr int kLdB = kBlockCols + (kBlockCols % 16 == 0 ? 8 : 0);
  static constexpr int kStageA = kBlockRows * kLdA;
  static constexpr int kStageB = Depth * kLdB;
  static constexpr std::size_t kSharedBytes = sizeof(double) * Stages * (kStageA + kStageB);
  static constexpr int kVector = Wide ? 2 : 1;  // doubles per copy and per store
  static constexpr int kChunksA = kBlockRows * Depth / kVector;
  static constexpr int kChunksB = Depth * kBlockCols / kVector;
  static constexpr int kCopiesA = (kChunksA + kThreads - 1) / kThreads;
  static constexpr int kCopiesB = (kChunksB + kThreads - 1) / kThreads;
  static_assert(kLdA % 8 == 4 && kLdB % 16 == 8, "fragment loads must not conflict on banks");
  static_assert(kBlockCols % 8 == 0 && Depth % kStep == 0 && Stages >= 2,
                "whole DMMA tiles and steps, at least double buffering");

  // Chunk e of a slice: of a, tile row m and slice column k; of b, slice row k and tile column n.
  OSPREY_FN static void chunkOfA(int e, int& m, int& k) {
    m = e / (Depth / kVector);
    k = (e % (Depth / kVector)) * kVector;
  }
  OSPREY_FN static void chunkOfB(int e, int& k, int& n) {
    k = e / (kBlockCols / kVector);
    n = (e % (kBlockCols / kVector)) * kVector;
  }
  // The first tile row and column of warp w's outputs.
  OSPREY_FN static int warpRow(int w) { return (w % WarpsM) * kWarpRows; }
  OSPREY_FN static int warpCol(int w) { return (w / WarpsM) * kWarpCols; }
  // This lane's element of an A fragment (row, k), of a B fragment (k, column), and of the
  // accumulator (row, first of two columns), within one 8 x 8 x 4 tile.
  OSPREY_FN static int fragmentRowA(int lane) { return lane / 4; }
  OSPREY_FN static int fragmentKA(int lane) { return lane % 4; }
  OSPREY_FN static int fragmentKB(int lane) { return lane % 4; }
  OSPREY_FN static int fragmentColB(int lane) { return lane / 4; }
  OSPREY_FN static int accumulatorRow(int lane) { return lane / 4; }
  OSPREY_FN static int accumulatorCol(int lane) { return 2 * (lane % 4); }
};

template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks)
    tensorMatMulKernel(double* __restrict__ out, const double* __restrict__ a, const double* __restrict__ b,
                       Index rows, Index inner, Index cols, Batching batching) {
  constexpr int kStages = T::kStages;
  constexpr int kTilesM = T::kWarpRows / 8, kTilesN = T::kWarpCols / 8;
  constexpr int kCopyBytes = 8 * T::kVector;
  extern __shared__ __align__(16) double tensorShared[];
  double* tileA = tensorShared;                     // [stage][m][k] = a[row0 + m][k0 + k]
  double* tileB = tensorShared + kStages * T::kStageA;  // [stage][k][n] = b[k0 + k][col0 + n]

  const Index z = blockIdx.z;
  out += z * batching.out;
  a += z * batching.a;
  b += z * batching.b;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32, warp = tid / 32;
  const Index row0 = static_cast<Index>(blockIdx.y) * T::kBlockRows;
  const Index col0 = static_cast<Index>(blockIdx.x) * T::kBlockCols;
  constexpr int kDepth = T::kDepth;
  const Index slices = (inner + kDepth - 1) / kDepth;
  const Index fullSlices = inner / kDepth;

  // Queue the copies of slice t into stage s. Consecutive threads copy consecutive chunks of a
  // row (of a: along k; of b: along the columns), so the global reads coalesce.
  auto copySlice = [&](int s, Index t) {
    const Index k0 = t * kDepth;
#pragma unroll
    for (int c = 0; c < T::kCopiesA; ++c) {
      const int e = tid + c * T::kThreads;
      if (T::kChunksA % T::kThreads == 0 || e < T::kChunksA) {
        int m = 0, k = 0;
        T::chunkOfA(e, m, k);
        const Index row = row0 + m, col = k0 + k;
        const bool valid = row < rows && col < inner;
        copyAsync<kCopyBytes>(tileA + s * T::kStageA + m * T::kLdA + k, valid ? a + row * inner + col : a, valid);
      }
    }
#pragma unroll
    for (int c = 0; c < T::kCopiesB; ++c) {
      const int e = tid + c * T::kThreads;
      if (T::kChunksB % T::kThreads == 0 || e < T::kChunksB) {
        int k = 0, n = 0;
        T::chunkOfB(e, k, n);
        const Index row = k0 + k, col = col0 + n;
        const bool valid = row < inner && col < cols;
        copyAsync<kCopyBytes>(tileB + s * T::kStageB + k * T::kLdB + n, valid ? b + row * cols + col : b, valid);
      }
    }
  };

  double acc[kTilesM][kTilesN][2];
#pragma unroll
  for (int i = 0; i < kTilesM; ++i)
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) acc[i][j][0] = acc[i][j][1] = 0.0;

  const int warpRow = T::warpRow(warp), warpCol = T::warpCol(warp);
  // This lane's element of its warp's first A and B fragments, in stage 0 of the slice.
  const double* fragmentA = tileA + (warpRow + T::fragmentRowA(lane)) * T::kLdA + T::fragmentKA(lane);
  const double* fragmentB = tileB + T::fragmentKB(lane) * T::kLdB + warpCol + T::fragmentColB(lane);

  // DMMA step q of stage s (slice k = 4q .. 4q + 3) on every tile of the warp.
  auto step = [&](int s, int q) {
    double fa[kTilesM], fb[kTilesN];
#pragma unroll
    for (int i = 0; i < kTilesM; ++i) fa[i] = fragmentA[s * T::kStageA + i * 8 * T::kLdA + q * kStep];
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) fb[j] = fragmentB[s * T::kStageB + q * kStep * T::kLdB + j * 8];
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) dmma(acc[i][j][0], acc[i][j][1], fa[i], fb[j]);
  };

  // The last slice's terms k = from .. depth - 1 (fewer than a DMMA step), one __fma_rn each on
  // this lane's own accumulators, k ascending.
  auto tail = [&](int s, int from, int depth) {
    const int row = warpRow + T::accumulatorRow(lane), col = warpCol + T::accumulatorCol(lane);
    for (int k = from; k < depth; ++k) {
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) {
        const double av = tileA[s * T::kStageA + (row + 8 * i) * T::kLdA + k];
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) {
          const double* bk = tileB + s * T::kStageB + k * T::kLdB + col + 8 * j;
          acc[i][j][0] = __fma_rn(av, bk[0], acc[i][j][0]);
          acc[i][j][1] = __fma_rn(av, bk[1], acc[i][j][1]);
        }
      }
    }
  };

#pragma unroll
  for (int p = 0; p < kStages - 1; ++p) {
    if (p < slices) copySlice(p, p);
    commitCopies();
  }
  for (Index t = 0; t < slices; ++t) {
    waitCopies<kStages - 2>();  // this thread's copies of slice t have landed ...
    __syncthreads();            // ... and everyone's; and everyone is done with slice t - 1's stage
    const Index next = t + kStages - 1;
    if (next < slices) copySlice(static_cast<int>(next % kStages), next);
    commitCopies();  // one group per slice, possibly empty, so the wait above counts slices
    const int s = static_cast<int>(t % kStages);
    if (t < fullSlices) {
#pragma unroll
      for (int q = 0; q < kDepth / kStep; ++q) step(s, q);
    } else {
      const int depth = static_cast<int>(inner - t * kDepth);
      const int steps = depth / kStep;
#pragma unroll
      for (int q = 0; q < kDepth / kStep; ++q)
        if (q < steps) step(s, q);
      tail(s, steps * kStep, depth);
    }
  }

#pragma unroll
  for (int i = 0; i < kTilesM; ++i) {
    const Index row = row0 + warpRow + 8 * i + T::accumulatorRow(lane);
    if (row >= rows) continue;
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
      const Index col = col0 + warpCol + 8 * j + T::accumulatorCol(lane);
      double* to = out + row * cols + col;
      if constexpr (T::kVector == 2) {
        if (col < cols) *reinterpret_cast<double2*>(to) = make_double2(acc[i][j][0], acc[i][j][1]);
      } else {
        if (col < cols) to[0] = acc[i][j][0];
        if (col + 1 < cols) to[1] = acc[i][j][1];
      }
    }
  }
}

// A tiling as the launcher sees it: its tile, how well it uses a multiprocessor, and its launch.
struct TensorChoice {
  int blockRows, blockCols, warps;
  // The share of a multiprocessor's DMMA rate a resident set of these blocks sustains (shared
  // memory and L2 bytes per DMMA grow as tiles shrink): an estimate, used only to choose.
  double efficiency;
};

template <int WarpTilesM, int WarpTilesN, int WarpsM, int WarpsN, int Depth, int Stages, int MinBlocks>
struct TensorKernel {
  template <bool Wide>
  using Tiling = TensorTiling<WarpTilesM, WarpTilesN, WarpsM, WarpsN, Depth, Stages, MinBlocks, Wide>;

  static constexpr TensorChoice choice(double efficiency) {
    return {Tiling<true>::kBlockRows, Tiling<true>::kBlockCols, Tiling<true>::kThreads / 32, efficiency};
  }

  // Blocks of this tiling one multiprocessor holds at once (registers and shared memory), on the
  // current device; 0 when the tiling cannot run there.
  static int blocksPerProcessor() {
    static std::atomic<int> known[64] = {};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    if (device < 64 && known[device].load(std::memory_order_relaxed) > 0) return known[device].load();
    using T = Tiling<true>;
    int blocks = 0;
    if (optIn<true>() != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, tensorMatMulKernel<T>, T::kThreads, T::kSharedBytes) !=
            cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    if (device < 64) known[device].store(blocks);
    return blocks;
  }

  template <bool Wide>
  static cudaError_t optIn() {
    using T = Tiling<Wide>;
    static SharedMemoryOptIn once;
    return once.ensure(tensorMatMulKernel<T>, T::kSharedBytes);
  }

  // The whole product, or `batch` products one after another (grid z). The grid's y and z extents
  // are capped at 65535 blocks, so very tall products go in bands of rows, long batches in runs.
  template <bool Wide>
  static cudaError_t launchAs(double* out, const double* a, const double* b, Index batch, Index rows, Index inner,
                              Index cols, cudaStream_t stream) {
    using T = Tiling<Wide>;
    if (const cudaError_t status = optIn<Wide>(); status != cudaSuccess) return status;
    constexpr Index kMaxBlocksYZ = 65535;
    const Index colBlocks = (cols + T::kBlockCols - 1) / T::kBlockCols;
    const Batching batching{rows * cols, rows * inner, inner * cols};
    for (Index first = 0; first < batch; first += kMaxBlocksYZ) {
      const Index run = batch - first < kMaxBlocksYZ ? batch - first : kMaxBlocksYZ;
      for (Index band = 0; band < rows; band += kMaxBlocksYZ * T::kBlockRows) {
        const Index bandRows = rows - band < kMaxBlocksYZ * T::kBlockRows ? rows - band : kMaxBlocksYZ * T::kBlockRows;
        const dim3 grid(static_cast<unsigned>(colBlocks), static_cast<unsigned>((bandRows + T::kBlockRows - 1) / T::kBlockRows),
                        static_cast<unsigned>(run));
        // A band is a product of bandRows rows whose a and out start `band` rows further on;
        // batching keeps the full product's strides.
        tensorMatMulKernel<T><<<grid, T::kThreads, T::kSharedBytes, stream>>>(
            out + first * batching.out + band * cols, a + first * batching.a + band * inner, b + first * batching.b,
            bandRows, inner, cols, batching);
        if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
      }
    }
    return cudaSuccess;
  }

  static cudaError_t launch(double* out, const double* a, const double* b, Index batch, Index rows, Index inner,
                            Index cols, cudaStream_t stream) {
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool wide = inner % 2 == 0 && cols % 2 == 0 && aligned(out) && aligned(a) && aligned(b);
    return wide ? launchAs<true>(out, a, b, batch, rows, inner, cols, stream)
                : launchAs<false>(out, a, b, batch, rows, inner, cols, stream);
  }
};

// The tilings (warp tiles, warps, k per slice, stages, blocks a multiprocessor). 128 x 128 (eight
// warps of 64 x 32) reuses each shared-memory fragment the most; 128 x 144 and 128 x 96 fill 132
// multiprocessors evenly where 128 x 128 would leave a partial last wave (1024 x 2304 outputs: 128
// tiles of 128 x 144, one wave, against 144 of 128 x 128, two); 64 x 64 spreads small or narrow
// outputs (an attention head's 1024 x 64) over more multiprocessors. The 32-deep 128 x 128
// (three stages, half the barriers) is there to be measured against the 16-deep one: the choice
// below does not take it.
using TensorSquare = TensorKernel<8, 4, 2, 4, 16, 4, 1>;      // 128 x 128
using TensorWide = TensorKernel<4, 9, 4, 2, 16, 4, 1>;        // 128 x 144
using TensorMiddle = TensorKernel<4, 6, 4, 2, 16, 4, 1>;      // 128 x 96
using TensorSmall = TensorKernel<4, 4, 2, 2, 16, 3, 2>;       // 64 x 64
using TensorSquareDeep = TensorKernel<8, 4, 2, 4, 32, 3, 1>;  // 128 x 128, 32 k a slice

// The tiling asked for, or the one with the shortest estimated time: the busiest multiprocessor
// runs ceil(tiles / SMs) tiles, as many at once as fit, at the tiling's efficiency scaled down when
// fewer than 8 warps are resident (too few to hide the DMMA and load latencies).
cudaError_t launchOwnTensor(double* out, const double* a, const double* b, Index batch, Index rows, Index inner,
                            Index cols, int multiprocessors, cudaStream_t stream, ExactTiling tiling) {
  struct Option {
    TensorChoice choice;
    int blocksPerProcessor;
    cudaError_t (*launch)(double*, const double*, const double*, Index, Index, Index, Index, cudaStream_t);
  };
  // In ExactTiling's order; an efficiency of 0 is never chosen.
  const Option options[] = {
      {TensorSquare::choice(1.0), TensorSquare::blocksPerProcessor(), &TensorSquare::launch},
      {TensorWide::choice(1.0), TensorWide::blocksPerProcessor(), &TensorWide::launch},
      {TensorMiddle::choice(0.95), TensorMiddle::blocksPerProcessor(), &TensorMiddle::launch},
      {TensorSmall::choice(0.7), TensorSmall::blocksPerProcessor(), &TensorSmall::launch},
      {TensorSquareDeep::choice(0.0), TensorSquareDeep::blocksPerProcessor(), &TensorSquareDeep::launch},
  };
  if (tiling != ExactTiling::Chosen) {
    const auto named = static_cast<std::size_t>(tiling);
    if (named >= std::size(options) || options[named].blocksPerProcessor < 1) return cudaErrorInvalidValue;
    return options[named].launch(out, a, b, batch, rows, inner, cols, stream);
  }
  const double processors = multiprocessors > 0 ? multiprocessors : 1;
  const Option* best = nullptr;
  double bestTime = 0.0;
  for (const Option& o : options) {
    if (o.blocksPerProcessor < 1 || o.choice.efficiency <= 0.0) continue;
    const double tiles = static_cast<double>(batch) * static_cast<double>((rows + o.choice.blockRows - 1) / o.choice.blockRows) *
                         static_cast<double>((cols + o.choice.blockCols - 1) / o.choice.blockCols);
    const double perProcessor = std::ceil(tiles / processors);
    const double resident = perProcessor < o.blocksPerProcessor ? perProcessor : o.blocksPerProcessor;
    const double warps = resident * o.choice.warps;
    const double rate = o.choice.efficiency * (warps < 8.0 ? warps / 8.0 : 1.0);
    const double time = perProcessor * o.choice.blockRows * o.choice.blockCols / rate;
    if (!best || time < bestTime) {
      best = &o;
      bestTime = time;
    }
  }
  if (!best) return cudaErrorInvalidConfiguration;  // no tiling fits this GPU's multiprocessors
  return best->launch(out, a, b, batch, rows, inner, cols, stream);
}

// A tensor-core product as asked: a named tiling of the own kernel, or (Chosen) the fastest of the
// own kernel's estimated best tiling and the cuBLASLt algorithms that reproduce its bits
// (osprey/gpu/cuda/exact_lt.hpp).
cudaError_t launchTensor(double* out, const double* a, const double* b, Index batch, Index rows, Index inner,
                         Index cols, int multiprocessors, cudaStream_t stream, ExactTiling tiling) {
  if (tiling == ExactTiling::Own)
    return launchOwnTensor(out, a, b, batch, rows, inner, cols, multiprocessors, stream, ExactTiling::Chosen);
  if (tiling != ExactTiling::Chosen)
    return launchOwnTensor(out, a, b, batch, rows, inner, cols, multiprocessors, stream, tiling);
  const OwnExactProduct own = [=](double* o, const double* x, const double* y) {
    return launchOwnTensor(o, x, y, batch, rows, inner, cols, multiprocessors, stream, ExactTiling::Chosen);
  };
  return exactProductChosen(out, a, b, batch, rows, inner, cols, stream, own);
}

// ---- few columns: kernels/narrow_matmul.hpp -----------------------------------------------------

// out (rows x cols) through the narrow kernel: few columns as they are, few rows mirrored (the
// kernel's rows are cols, its columns rows).
template <NarrowLayout Layout>
cudaError_t launchNarrowOf(double* out, const double* a, const double* b, Index rows, Index inner, Index cols,
                           cudaStream_t stream) {
  using cuda_detail::launchNarrow;
  using cuda_detail::StoreProduct;
  constexpr bool kMirror = Layout == NarrowLayout::Mirror;
  const Index kernelRows = kMirror ? cols : rows, few = kMirror ? rows : cols;
  const double* large = kMirror ? b : a;
  const double* small = kMirror ? a : b;
  switch (few) {
    case 1: return launchNarrow<1, Layout>(StoreProduct<1, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
    case 2: return launchNarrow<2, Layout>(StoreProduct<2, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
    case 3: return launchNarrow<3, Layout>(StoreProduct<3, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
    case 4: return launchNarrow<4, Layout>(StoreProduct<4, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
    case 5: return launchNarrow<5, Layout>(StoreProduct<5, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
    case 6: return launchNarrow<6, Layout>(StoreProduct<6, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
    case 7: return launchNarrow<7, Layout>(StoreProduct<7, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
    default: return launchNarrow<8, Layout>(StoreProduct<8, Layout>{out, kernelRows}, large, small, kernelRows, inner, stream);
  }
}

constexpr int kFewRows = 8;  // at most this many rows take the mirrored path

// Few columns first (decoding: weightᵀ times one token's column), then few rows; a product small
// both ways takes whichever kernel has more parallel outputs per launch.
bool takesNarrow(Index rows, Index cols) { return cols <= kNarrowCols && cols < rows; }
bool takesFewRows(Index rows) { return rows <= kFewRows; }

cudaError_t launchSmall(double* out, const double* a, const double* b, Index rows, Index inner, Index cols,
                        cudaStream_t stream) {
  if (takesNarrow(rows, cols)) return launchNarrowOf<NarrowLayout::Plain>(out, a, b, rows, inner, cols, stream);
  return launchNarrowOf<NarrowLayout::Mirror>(out, a, b, rows, inner, cols, stream);
}

}  // namespace

bool takesTensorCores(Index rows, Index cols) { return !takesNarrow(rows, cols) && !takesFewRows(rows); }

cudaError_t launchExactMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner, Index cols,
                              int multiprocessors, cudaStream_t stream, ExactTiling tiling) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (takesNarrow(rows, cols) || takesFewRows(rows)) return launchSmall(out, a, b, rows, inner, cols, stream);
  return launchTensor(out, a, b, 1, rows, inner, cols, multiprocessors, stream, tiling);
}

// `batch` products of one shape, product z being out_z = a_z * b_z with a_z at a + z·rows·inner,
// b_z at b + z·inner·cols and out_z at out + z·rows·cols (attention's per-head products). Each
// output is the single product's chain, so the batch equals `batch` calls of launchExactMatMul
// bit for bit; tensor-core shapes go to one launch (grid z), and shapes that take the few-rows or
// few-columns kernels are launched product by product.
cudaError_t launchExactMatMulBatched(Scalar* out, const Scalar* a, const Scalar* b, Index batch, Index rows,
                                     Index inner, Index cols, int multiprocessors, cudaStream_t stream,
                                     ExactTiling tiling) {
  if (batch == 0 || rows == 0 || cols == 0) return cudaSuccess;
  if (takesNarrow(rows, cols) || takesFewRows(rows)) {
    for (Index z = 0; z < batch; ++z) {
      const cudaError_t status =
          launchSmall(out + z * rows * cols, a + z * rows * inner, b + z * inner * cols, rows, inner, cols, stream);
      if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
  }
  return launchTensor(out, a, b, batch, rows, inner, cols, multiprocessors, stream, tiling);
}

// ---- one operand held transposed ------------------------------------------------------------------

namespace {

// x (rows, cols) -> out (cols, rows), queued on `stream` (the device's tiled copy).
cudaError_t transposeInto(double* out, const double* x, Index rows, Index cols, int multiprocessors,
                          cudaStream_t stream) {
  const Index tiles = ((rows + cuda_detail::kCopyTile - 1) / cuda_detail::kCopyTile) *
                      ((cols + cuda_detail::kCopyTile - 1) / cuda_detail::kCopyTile);
  const Index most = static_cast<Index>(multiprocessors > 0 ? multiprocessors : 1) * cuda_detail::kCopyBlocksPerProcessor;
  // out (cols, rows): element (c, r) reads x[r][c], a block of rowStride 1 read down x's rows.
  const BlockLayout layout{1, 0, 0, 0, 1, cols};
  cuda_detail::copyBlocksKernel<<<static_cast<unsigned>(tiles < most ? tiles : most), cuda_detail::kCopyThreads, 0,
                                  stream>>>(out, x, layout, 1, cols, rows, true);
  return cudaGetLastError();
}

// The product with the held operand copied, as the model's reference takes it (gpt2/layers/
// matmul.hpp): aᵀ · b as transpose(a) · b; a · bᵀ as (b · aᵀ)ᵀ, which copies the activation a and
// the result rather than the weight b. Never cuBLASLt: this is what a cuBLASLt choice is checked
// against, and it runs inside that check.
cudaError_t productOfCopies(double* out, const double* a, const double* b, Index rows, Index inner, Index cols,
                            Transposed layout, int multiprocessors, cudaStream_t stream, const ExactScratch& scratch,
                            ExactTiling tiling) {
  struct Copies {  // given back when the launches that read them are queued (or have failed)
    const ExactScratch& scratch;
    double *a = nullptr, *out = nullptr;
    ~Copies() {
      if (a) scratch.give(a);
      if (out) scratch.give(out);
    }
  } copies{scratch};
  copies.a = scratch.take(rows * inner);
  if (copies.a == nullptr) return cudaErrorMemoryAllocation;
  if (layout == Transposed::A) {
    if (const cudaError_t s = transposeInto(copies.a, a, inner, rows, multiprocessors, stream); s != cudaSuccess)
      return s;
    return launchExactMatMul(out, copies.a, b, rows, inner, cols, multiprocessors, stream, tiling);
  }
  copies.out = scratch.take(rows * cols);
  if (copies.out == nullptr) return cudaErrorMemoryAllocation;
  if (const cudaError_t s = transposeInto(copies.a, a, rows, inner, multiprocessors, stream); s != cudaSuccess) return s;
  if (const cudaError_t s = launchExactMatMul(copies.out, b, copies.a, cols, inner, rows, multiprocessors, stream, tiling);
      s != cudaSuccess)
    return s;
  return transposeInto(out, copies.out, cols, rows, multiprocessors, stream);
}

}  // namespace

cudaError_t launchExactMatMulTransposed(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                                        Index cols, Transposed layout, int multiprocessors, cudaStream_t stream,
                                        const ExactScratch& scratch) {
  if (layout == Transposed::None) return launchExactMatMul(out, a, b, rows, inner, cols, multiprocessors, stream);
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (!takesTensorCores(rows, cols))
    return productOfCopies(out, a, b, rows, inner, cols, layout, multiprocessors, stream, scratch, ExactTiling::Chosen);
  const OwnExactProduct own = [=](double* o, const double* x, const double* y) {
    return productOfCopies(o, x, y, rows, inner, cols, layout, multiprocessors, stream, scratch, ExactTiling::Own);
  };
  return exactProductChosen(out, a, b, 1, rows, inner, cols, stream, own, layout);
}

}  // namespace osprey
