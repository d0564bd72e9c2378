// The recorded exact decoding step's lm head and greedy choice (gpt2/cuda/recorded_cuda.hpp), the
// lm head's products made only where they can decide the choice. The lm head is V products of the
// hidden row x (C) with wte's rows, each the contract's fma chain (DESIGN.md §4), and reads 8·V·C
// bytes a token (309 MB at 124M: a tenth of a decoded token's time, at the memory's speed). The
// greedy choice needs only the largest logit and the first row that holds it. So:
//
//   1. boundLogits reads a half-precision copy of wte (a quarter of the bytes; made once a
//      recording) and gives each row v an estimate A_v = Σ x_k·w̃_vk and a size S_v = Σ |x_k|·|w̃_vk|,
//      in doubles, in any order, and from them an interval [A_v - E_v, A_v + E_v] that holds the
//      exact chain's logit L_v:
//        E_v = 2^-9·S_v + 2^-23·Σ_k |x_k| + 2^-997
//      (docs/EXACTNESS.md derives it: the half copy's rounding, at most 2^-11·|w̃| + 2^-25 a weight;
//      the estimate's, the size's and the chain's own roundings, γ_2C of the size each; the
//      underflow, 2^-1075 a step; and a factor two over the sum for the rounding of the interval's
//      ends). Each group of rows keeps its largest lower and upper end. The bound is wider than
//      a float copy's (2^-21·S_v) and leaves a few more candidates for step 2, whose exact chains
//      cost little beside the bytes saved: the bounds read more bytes than any other part of a token.
//   2. chooseBoundedThenEmbed takes M, the largest lower end. A row whose upper end is below M has a
//      logit below another row's, so it is not the largest; the rows left (the candidates: every
//      row that holds the largest logit is among them) get their exact chains (from +0.0, fma in k
//      order, so the bits the lm head's product gives), a warp a row on the tensor cores
//      (row_dmma.hpp's warpDot), over rows the block stages in shared memory a few at a time (one
//      round trip to the memory a few rows, where a chain reading its row from the memory would
//      wait for every few terms),
//      and the earliest largest of those is the choice, as chooseThenEmbed makes it from every logit.
//
// Where an interval cannot be trusted (a size above 2^1000 or not finite: weights past the half
// range, a hidden row that is not finite) or more than kMostCandidates rows are left, the choice
// makes every row's exact chain itself: far slower, the same token.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/bounded_choice.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "gpt2/cuda/chains.hpp"
#include "gpt2/cuda/recorded_kernels.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/cuda/kernels/block_trace.hpp"
#include "osprey/gpu/cuda/kernels/dependent_launch.hpp"
#include "osprey/gpu/cuda/kernels/row_dmma.hpp"
#include "osprey/gpu/surface.hpp"

namespace gpt2::bounded_choice {

constexpr int kBoundThreads = 256;
constexpr int kBoundWarps = kBoundThreads / 32;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerGroup = kBoundWarps * kRowsPerWarp;
constexpr int kBoundBlocksEach = 2;  // the bounds' blocks a multiprocessor
constexpr int kHalvesAPiece = 8;          // halves a 16-byte load of the copy holds
constexpr int kHeldPieces = 3;            // pieces a lane loads of each row before its wait: 768 wide, whole
constexpr long long kMostWidth = 2048;    // the hidden row and a candidate row in the choice's shared memory
constexpr int kMostCandidates = 256;      // rows the choice holds for their exact chains
constexpr int kChoiceShared = 5376;       // doubles of the choice's shared memory (42 KB): the hidden row, staged rows
static_assert(kChoiceShared >= 2 * kMostWidth, "the choice stages at least one row beside the hidden row");

// Whether a model of width C (and V rows) takes the bounded choice: rows of whole 16-byte pieces
// (so each row's copy starts on 16 bytes), a hidden row that fits shared memory, block indices in
// an int, and device code with the FP64 mma shapes the candidates' chains run on (row_dmma.hpp;
// without them the recorded step makes the whole lm head, as for any model that does not fit).
inline bool fits(long long V, long long C) {
  return C > 0 && C % kHalvesAPiece == 0 && C <= kMostWidth && V > 0 && V / kRowsPerGroup < INT_MAX &&
         osprey::cuda_detail::dmmaCompiled();
}

namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// Each weight rounded once to the nearest half (no float between: a second rounding could move it
// further than the bound allows); past the half range, an infinity, which leaves the size infinite
// and the bounds untrusted.
__global__ void roundToHalves(const double* from, __half* into, long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    into[i] = __double2half(from[i]);
}

// The eight halves of a 16-byte piece, as doubles (each exact).
__device__ __forceinline__ void halvesOf(uint4 piece, double (&w)[kHalvesAPiece]) {
  const unsigned words[4] = {piece.x, piece.y, piece.z, piece.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 pair;
    static_assert(sizeof pair == sizeof words[i]);
    memcpy(&pair, &words[i], sizeof pair);
    const float2 f = __half22float2(pair);
    w[2 * i] = f.x;
    w[2 * i + 1] = f.y;
  }
}

// combine over a warp's values, in any order (a sum only the bounds read, or a maximum), on every lane.
template <class Combine>
__device__ __forceinline__ double acrossWarp(double v, Combine combine) {
  for (int offset = 16; offset > 0; offset /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ double warpTotal(double v) {
  return acrossWarp(v, [](double a, double b) { return a + b; });
}

// Step 1 above for groups of kRowsPerGroup rows, kRowsPerWarp a warp, a block taking group
// blockIdx.x and every gridDim.x-th after it (a few blocks a multiprocessor: one wave, where a block
// a group made a dozen waves of blocks each waiting for its own loads), the next group's halves in
// flight while the current one's are combined. Each lane holds its share of the hidden row (kHeldPieces
// pieces' values, x[8q .. 8q + 7] for q = lane + 32j) in registers, read once; a wider row's rest is
// read from shared memory. Launched as a programmatic dependent: the first group's halves are loaded
// before the wait for the hidden row. `upper` (V) gets each row's upper end, groupLower/groupUpper
// (a group each) the largest ends of the group's rows; `untrusted` is set where a size is above
// 2^1000 or NaN.
__global__ void __launch_bounds__(kBoundThreads, kBoundBlocksEach)
    boundLogits(const double* x, const uint4* weights, long long V, int pieces, long long groups, double* upper,
                double* groupLower, double* groupUpper, int* untrusted) {
  extern __shared__ double hidden[];  // (kHalvesAPiece·pieces), written and read past the held pieces
  __shared__ double lowerOfWarp[kBoundWarps], upperOfWarp[kBoundWarps];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  osprey::cuda_detail::BlockTrace trace;
  trace.open(threadIdx.x == 0);
  using Held = uint4[kRowsPerWarp][kHeldPieces];
  auto loadGroup = [&](Held& into, long long g) {
    const long long first = g * kRowsPerGroup + warp * kRowsPerWarp;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int j = 0; j < kHeldPieces; ++j) {
        const int q = lane + 32 * j;
        into[r][j] = g < groups && first + r < V && q < pieces ? __ldg(weights + (first + r) * pieces + q)
                                                               : make_uint4(0, 0, 0, 0);
      }
    }
  };
  Held held;
  loadGroup(held, blockIdx.x);
  osprey::cuda_detail::startDependents();
  osprey::cuda_detail::awaitEarlierKernels();
  trace.mark<1>();
  const int C = kHalvesAPiece * pieces;
  double xs[kHeldPieces][kHalvesAPiece];
#pragma unroll
  for (int j = 0; j < kHeldPieces; ++j)
#pragma unroll
    for (int u = 0; u < kHalvesAPiece; ++u) {
      const int c = kHalvesAPiece * (lane + 32 * j) + u;
      xs[j][u] = c < C ? x[c] : 0.0;
    }
  const bool wide = pieces > 32 * kHeldPieces;
  constexpr int kHeldWidth = kHalvesAPiece * 32 * kHeldPieces;  // the row's values the lanes hold
  if (wide) {  // the rest, which every lane reads
    for (int c = kHeldWidth + static_cast<int>(threadIdx.x); c < C; c += kBoundThreads) hidden[c] = x[c];
    __syncthreads();
  }
  trace.mark<2>();
  double size = 0.0;  // Σ |x_k|
#pragma unroll
  for (int j = 0; j < kHeldPieces; ++j)
#pragma unroll
    for (int u = 0; u < kHalvesAPiece; ++u) size += fabs(xs[j][u]);
  if (wide)
    for (int c = kHeldWidth + lane; c < C; c += 32) size += fabs(hidden[c]);
  size = warpTotal(size);
  bool trusted = size <= 0x1p1000;
  for (long long g = blockIdx.x; g < groups; g += gridDim.x) {
    Held next;
    loadGroup(next, g + gridDim.x);  // in flight while this group's rows are combined
    const long long first = g * kRowsPerGroup + warp * kRowsPerWarp;
    double lowest = -HUGE_VAL, highest = -HUGE_VAL;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const long long v = first + r;
      double a = 0.0, s = 0.0;
      auto take = [&](const double* xq, uint4 piece) {
        double wq[kHalvesAPiece];
        halvesOf(piece, wq);
#pragma unroll
        for (int u = 0; u < kHalvesAPiece; ++u) {
          a = fma(xq[u], wq[u], a);
          s = fma(fabs(xq[u]), fabs(wq[u]), s);
        }
      };
#pragma unroll
      for (int j = 0; j < kHeldPieces; ++j)
        if (lane + 32 * j < pieces) take(xs[j], held[r][j]);
      if (wide && v < V)
        for (int q = lane + 32 * kHeldPieces; q < pieces; q += 32)
          take(hidden + kHalvesAPiece * q, __ldg(weights + v * pieces + q));
      a = warpTotal(a);
      s = warpTotal(s);
      if (v < V) {
        const double e = s * 0x1p-9 + size * 0x1p-23 + 0x1p-997;
        const double lo = a - e, hi = a + e;
        trusted = trusted && s <= 0x1p1000;  // false for NaN
        lowest = fmax(lowest, lo);
        highest = fmax(highest, hi);
        if (lane == 0) upper[v] = hi;
      }
    }
    if (lane == 0) {
      lowerOfWarp[warp] = lowest;
      upperOfWarp[warp] = highest;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kBoundWarps; ++w) {
        lowest = fmax(lowest, lowerOfWarp[w]);
        highest = fmax(highest, upperOfWarp[w]);
      }
      groupLower[g] = lowest;
      groupUpper[g] = highest;
    }
    __syncthreads();  // lowerOfWarp and upperOfWarp are free for the next group
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int j = 0; j < kHeldPieces; ++j) held[r][j] = next[r][j];
  }
  if (!trusted && lane == 0) *untrusted = 1;
  trace.mark<5>();
  trace.close(osprey::cuda_detail::kTraceBounds, weights);
}

// Step 2 above, then chooseThenEmbedFrom (recorded_kernels.hpp): one block of kChooseThreads.
// Resets `untrusted` for the next replay.
__global__ void __launch_bounds__(recorded_kernels::kChooseThreads)
    chooseBoundedThenEmbed(const double* x, const double* wte, const double* upper, const double* groupLower,
                           const double* groupUpper, long long groups, long long V, long long C, int* untrusted,
                           int* position, int* tokens, double* bests, double* embedding, const double* wpe,
                           long long maxT) {
  using recorded_kernels::Candidate;
  constexpr int kThreads = recorded_kernels::kChooseThreads;
  extern __shared__ double hidden[];  // (C), then candidate rows: kChoiceShared in all
  __shared__ double lowerOfWarp[kThreads / 32];
  __shared__ long long candidates[kMostCandidates];
  __shared__ int count;
  __shared__ double bar;
  __shared__ bool everyRow;
  const int t = static_cast<int>(threadIdx.x);
  osprey::cuda_detail::BlockTrace trace;
  trace.open(t == 0);
  for (long long c = t; c < C; c += kThreads) hidden[c] = x[c];
  double m = -HUGE_VAL;
  for (long long g = t; g < groups; g += kThreads) m = fmax(m, groupLower[g]);
  m = acrossWarp(m, [](double a, double b) { return fmax(a, b); });
  if (t % 32 == 0) lowerOfWarp[t / 32] = m;
  __syncthreads();
  if (t == 0) {
    for (int w = 0; w < kThreads / 32; ++w) m = fmax(m, lowerOfWarp[w]);
    bar = m;
    count = 0;
    everyRow = *untrusted != 0;
    *untrusted = 0;  // the next replay's bounds start trusted
  }
  __syncthreads();
  if (!everyRow) {
    for (long long g = t; g < groups; g += kThreads) {
      if (!(groupUpper[g] >= bar)) continue;
      const long long end = min(V, (g + 1) * kRowsPerGroup);
      for (long long v = g * kRowsPerGroup; v < end; ++v)
        if (upper[v] >= bar) {
          const int at = atomicAdd(&count, 1);
          if (at < kMostCandidates) candidates[at] = v;
        }
    }
  }
  __syncthreads();
  trace.mark<2>();
  const int n = count;
  Candidate mine{-HUGE_VAL, LLONG_MAX};
  if (everyRow || n > kMostCandidates) {
    // Every row in order, as chooseThenEmbed folds the logits: the earliest largest, NaN never wins.
    for (long long v = t; v < V; v += kThreads) {
      const double logit = chains::dotAhead<8>(hidden, wte + v * C, 1, static_cast<int>(C));
      if (logit > mine.value) mine = Candidate{logit, v};
    }
  } else {
    double* staged = hidden + C;
    const int atOnce = static_cast<int>((kChoiceShared - C) / C);  // 1 or more: fits() bounds C
    for (int first = 0; first < n; first += atOnce) {
      const int rows = min(atOnce, n - first);
      for (long long i = t; i < rows * C; i += kThreads) {
        const long long r = i / C;
        staged[i] = wte[candidates[first + r] * C + (i - r * C)];
      }
      __syncthreads();
      // A warp a staged row, its chain as tensor-core steps (row_dmma.hpp's warpDot: the same fma
      // chain from +0.0, k ascending): one thread's chain of C dependent fmas, each waiting for its
      // operands from shared memory, cost the choice ~9 us a token at C = 768 (bench/RESULTS.md).
      // A narrow model stages more rows than the block has warps: each warp takes every 32nd.
      for (int w = t / 32; w < rows; w += kThreads / 32) {
        const double logit = osprey::cuda_detail::warpDot(hidden, staged + w * C, static_cast<int>(C), 0.0);
        if (t % 32 == 0) mine = recorded_kernels::earlierMaximum(mine, Candidate{logit, candidates[first + w]});
      }
      __syncthreads();
    }
  }
  trace.mark<3>();
  recorded_kernels::chooseThenEmbedFrom(mine, V, position, tokens, bests, embedding, wte, wpe, C, maxT);
  trace.mark<5>();
  trace.close(osprey::cuda_detail::kTraceChoice, upper);
}

}  // namespace

// What the bounded choice holds for a recording: the half copy of wte, the rows' upper ends, the
// groups' largest ends, the untrusted flag.
class Choice {
 public:
  // For wte (V, C) (fits(V, C) must hold), its half copy made on `stream`.
  static osprey::Result<Choice> make(const std::shared_ptr<osprey::CudaDevice>& device, const double* wte,
                                     long long V, long long C, cudaStream_t stream) {
    Choice b;
    b.m_V = V;
    b.m_C = C;
    b.m_groups = (V + kRowsPerGroup - 1) / kRowsPerGroup;
    b.m_grid = std::min<long long>(b.m_groups, static_cast<long long>(kBoundBlocksEach) * device->multiprocessors());
    b.m_wte = wte;
    b.m_halves = OSPREY_TRY(osprey::gpuAllocate<__half>(device, V * C));
    b.m_upper = OSPREY_TRY(osprey::gpuAllocate<double>(device, V));
    b.m_groupLower = OSPREY_TRY(osprey::gpuAllocate<double>(device, b.m_groups));
    b.m_groupUpper = OSPREY_TRY(osprey::gpuAllocate<double>(device, b.m_groups));
    b.m_untrusted = OSPREY_TRY(osprey::gpuAllocate<int>(device, 1));
    OSPREY_CUDA_CHECK(cudaMemsetAsync(b.m_untrusted.data(), 0, sizeof(int), stream),
                      "recorded decoding: the bounded choice's flag");
    roundToHalves<<<1024, 256, 0, stream>>>(wte, b.m_halves.data(), V * C);
    OSPREY_CUDA_CHECK(cudaGetLastError(), "recorded decoding: the half copy of wte");
    return b;
  }

  // The bounds of x's logits, then the choice, the position moved on and the next embedding
  // (chooseThenEmbed's outputs), queued on `stream`.
  osprey::Result<void> launch(const double* x, cudaStream_t stream, int* position, int* tokens, double* bests,
                              double* embedding, const double* wpe, long long maxT) {
    const auto hiddenBytes = static_cast<std::size_t>(m_C) * sizeof(double);
    OSPREY_CUDA_CHECK(osprey::cuda_detail::launchOverlapped(
                          dim3(static_cast<unsigned>(m_grid)), dim3(kBoundThreads), hiddenBytes, stream, boundLogits,
                          x, reinterpret_cast<const uint4*>(m_halves.data()), m_V, static_cast<int>(m_C / kHalvesAPiece),
                          m_groups, m_upper.data(), m_groupLower.data(), m_groupUpper.data(), m_untrusted.data()),
                      "recorded decoding: the lm head's bounds' launch");
    chooseBoundedThenEmbed<<<1, recorded_kernels::kChooseThreads, kChoiceShared * sizeof(double), stream>>>(
        x, m_wte, m_upper.data(), m_groupLower.data(), m_groupUpper.data(), m_groups, m_V, m_C, m_untrusted.data(),
        position, tokens, bests, embedding, wpe, maxT);
    OSPREY_CUDA_CHECK(cudaGetLastError(), "recorded decoding: the bounded greedy choice's launch");
    return {};
  }

 private:
  long long m_V = 0, m_C = 0, m_groups = 0;  // groups of kRowsPerGroup rows
  long long m_grid = 0;                       // the bounds' blocks
  const double* m_wte = nullptr;
  osprey::GpuBuffer<osprey::CudaDevice, __half> m_halves;
  osprey::GpuBuffer<osprey::CudaDevice, double> m_upper, m_groupLower, m_groupUpper;
  osprey::GpuBuffer<osprey::CudaDevice, int> m_untrusted;
};

}  // namespace gpt2::bounded_choice
