// The reference LayerNorm forward (gpt2/layers/layernorm.hpp) as one kernel for the exact cuda
// handlers (gpt2/cuda/exact_cuda.hpp, recorded_cuda.hpp). Its three launches (the mean's fold, the
// variance's fold, the element build) are, in decoding, three waits for a single row of a few
// hundred values, and in training three passes over the activations. One block holds a few rows
// in shared memory; one thread per row walks the row twice, in column order:
//
//   sum  = 0.0;  sum = sum + x[c]            mean = sum / C
//   acc  = +0.0; d = x[c] - mean; acc = fma(d, d, acc)
//   rstd = 1.0 / sqrt(acc / C + eps)
//
// and then every thread computes ((x[c] - mean) * rstd) * w[c] + b[c] for its share of the
// elements. The backward's per-row part is the same shape: one thread per row runs the two chains
// of its statistics (dnorm's sum as fma(dnorm, 1.0, acc), and fma(dnorm, norm, acc)), then every
// thread computes dx; dw and db, chains down the columns, take a kernel of their own with a lane a
// column (layerNormParamGradColumns). These are the reference's own operations in its order
// (sumRows's seed and combine, dotRows's fused chains, the builds' expressions, which -fmad=false
// keeps unfused), so the same doubles; tests/cuda/exact_cuda_test.cu compares every output bit for
// bit.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/layernorm_rows.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>

#include "gpt2/layers/layernorm.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/math.hpp"

namespace gpt2::layernorm_rows {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kThreads = 128;
constexpr int kMostRows = 8;                         // rows a block, at most
constexpr int kAhead = 8;  // a folding thread's loads issued before the chain's operations on them
constexpr int kBatch = 8;  // a thread's global loads issued together before it stores or computes
// Dynamic shared memory without opting in to more: 48 KiB less room for the kernels' static arrays.
constexpr long long kSharedBytes = 46 * 1024;
constexpr long long kLongestRow = kSharedBytes / 8 - 1;  // one row and its padding must fit

// Rows a block takes for rows of C: as many as fit, padded by one element so that the folding
// threads' reads of neighbouring rows fall in different banks.
inline int rowsPerBlock(long long C) {
  const long long fit = kSharedBytes / (8 * (C + 1));
  return static_cast<int>(fit < kMostRows ? fit : kMostRows);
}

// For the block's elements e = t, t + kThreads, ... below total (row e / C, column e % C, in int:
// a block holds at most kMostRows rows of kLongestRow), load(e, n, c) for kBatch of them and then
// use(e, n, c, loaded) for each: a global load may not pass a store the compiler cannot tell apart
// from its address, so load, store, load, store would wait out each load's latency in turn.
template <class Load, class Use>
__device__ __forceinline__ void inBatches(int t, int total, int C, Load load, Use use) {
  using Loaded = decltype(load(0, 0, 0));
  for (int e0 = t; e0 < total; e0 += kBatch * kThreads) {
    Loaded v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = e0 + u * kThreads;
      if (e < total) v[u] = load(e, e / C, e % C);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = e0 + u * kThreads;
      if (e < total) use(e, e / C, e % C, v[u]);
    }
  }
}

// step(read(c)) for c = 0 .. C - 1 in order, Ahead operands read from shared memory together and
// then their Ahead steps: the chain waits on one group's loads at a time, not on each load. (Reading
// the next group while the current one's steps run measured slower, its registers doubled:
// bench/cuda/NOTES.md.)
template <int Ahead = kAhead, class Read, class Step>
__device__ __forceinline__ void walkInOrder(int C, Read read, Step step) {
  using Operand = decltype(read(0));
  int c = 0;
  for (; c + Ahead <= C; c += Ahead) {
    Operand v[Ahead];
#pragma unroll
    for (int u = 0; u < Ahead; ++u) v[u] = read(c + u);
#pragma unroll
    for (int u = 0; u < Ahead; ++u) step(v[u]);
  }
  for (; c < C; ++c) step(read(c));
}

struct Three {
  double a, b, c;
};
struct Two {
  double a, b;
};

__global__ void __launch_bounds__(kThreads)
    layerNormRows(double* __restrict__ out, double* __restrict__ mean, double* __restrict__ rstd,
                  const double* __restrict__ x, const double* __restrict__ w, const double* __restrict__ b,
                  long long N, long long C, int rows) {
  extern __shared__ double held[];  // [rows][C + 1]
  __shared__ double meanOf[kMostRows], rstdOf[kMostRows];
  const long long n0 = static_cast<long long>(blockIdx.x) * rows;
  const int count = static_cast<int>(N - n0 < rows ? N - n0 : rows);
  const int Ci = static_cast<int>(C), ld = Ci + 1, total = count * Ci;
  const int t = static_cast<int>(threadIdx.x);
  const double* xs = x + n0 * C;
  inBatches(t, total, Ci, [&](int e, int, int) { return xs[e]; },
            [&](int, int n, int c, double v) { held[n * ld + c] = v; });
  __syncthreads();
  if (t < count) {
    const double* row = held + t * ld;
    const auto Cs = static_cast<double>(C);
    const auto read = [&](int c) { return row[c]; };
    double sum = 0.0;
    walkInOrder(Ci, read, [&](double v) { sum = sum + v; });
    const double m = sum / Cs;
    double acc = 0.0;
    walkInOrder(Ci, read, [&](double v) {
      const double d = v - m;
      acc = __fma_rn(d, d, acc);
    });
    const double r = 1.0 / osprey::math::sqrt(acc / Cs + kLayerNormEps);
    meanOf[t] = m;
    rstdOf[t] = r;
    mean[n0 + t] = m;
    rstd[n0 + t] = r;
  }
  __syncthreads();
  double* outs = out + n0 * C;
  inBatches(t, total, Ci, [&](int, int n, int c) { return Three{held[n * ld + c], w[c], b[c]}; },
            [&](int e, int n, int, Three v) {
              const double norm = (v.a - meanOf[n]) * rstdOf[n];
              outs[e] = norm * v.b + v.c;
            });
}

// dx for rows of dout and x (gpt2::reference::layernormBackward's stats fold and dx build). The
// block holds dnorm = w[c] * dout (the reference computes that product in both its fold's terms and
// its build) and x.
__global__ void __launch_bounds__(kThreads)
    layerNormBackwardRows(double* __restrict__ dx, const double* __restrict__ dout, const double* __restrict__ x,
                          const double* __restrict__ w, const double* __restrict__ mean,
                          const double* __restrict__ rstd, long long N, long long C, int rows) {
  extern __shared__ double held[];  // dnorm then x, [rows][C + 1] each
  __shared__ double dnormMean[kMostRows], dnormNormMean[kMostRows], meanOf[kMostRows], rstdOf[kMostRows];
  const long long n0 = static_cast<long long>(blockIdx.x) * rows;
  const int count = static_cast<int>(N - n0 < rows ? N - n0 : rows);
  const int Ci = static_cast<int>(C), ld = Ci + 1, total = count * Ci;
  double* heldDnorm = held;
  double* heldX = held + rows * ld;
  const int t = static_cast<int>(threadIdx.x);
  const double *douts = dout + n0 * C, *xs = x + n0 * C;
  inBatches(t, total, Ci, [&](int e, int, int c) { return Three{douts[e], xs[e], w[c]}; },
            [&](int, int n, int c, Three v) {
              heldDnorm[n * ld + c] = v.c * v.a;
              heldX[n * ld + c] = v.b;
            });
  __syncthreads();
  if (t < count) {
    const double* d = heldDnorm + t * ld;
    const double* v = heldX + t * ld;
    const double m = mean[n0 + t], r = rstd[n0 + t];
    const auto Cs = static_cast<double>(C);
    double sumDnorm = 0.0, sumDnormNorm = 0.0;
    walkInOrder(Ci, [&](int c) { return Two{d[c], v[c]}; }, [&](Two o) {
      sumDnorm = __fma_rn(o.a, 1.0, sumDnorm);
      const double norm = (o.b - m) * r;
      sumDnormNorm = __fma_rn(o.a, norm, sumDnormNorm);
    });
    dnormMean[t] = sumDnorm / Cs;
    dnormNormMean[t] = sumDnormNorm / Cs;
    meanOf[t] = m;
    rstdOf[t] = r;
  }
  __syncthreads();
  double* dxs = dx + n0 * C;
  inBatches(t, total, Ci, [&](int, int n, int c) { return Two{heldDnorm[n * ld + c], heldX[n * ld + c]}; },
            [&](int e, int n, int, Two o) {
              const double s = rstdOf[n];
              const double norm = (o.b - meanOf[n]) * s;
              dxs[e] = ((o.a - dnormMean[n]) - norm * dnormNormMean[n]) * s;
            });
}

// dw[c] = the fma chain of norm · dout down column c and db[c] = the sum of dout down it, n
// ascending from 0.0 (detail::layernormParamGrads: a fold row per column), kGradCols columns a
// block. Its first kGradCols lanes fold, a column each; warps 1.. copy the next kGradDepth rows of
// the block's columns of dout and x, and those rows' mean and rstd, into the other buffer while the
// lanes walk this one. A column's chain is N steps (4,096 at GPT-2's training shape), so what pays
// is every column's chain running at once with its operands already near; the reference's fold, a
// block a column loading one double of each row, moved a small fraction of the memory's rate. The
// template's shape (columns and rows a buffer, threads, operands read together) is there for the
// benchmark that chose the defaults (bench/cuda/layernorm_variants.cu).
constexpr int kGradCols = 4;      // 32 bytes of each row: one sector
constexpr int kGradDepth = 256;   // rows a buffer
constexpr int kGradThreads = 256;

template <int Cols, int Depth>
struct GradTile {
  static constexpr int kTerms = 2 * Depth * Cols;     // dout's and x's share of a buffer
  static constexpr int kElements = kTerms + 2 * Depth;  // and the rows' mean and rstd
  double dout[Depth][Cols], x[Depth][Cols], mean[Depth], rstd[Depth];
};

struct Four {
  double dout, x, mean, rstd;
};

template <int Cols = kGradCols, int Depth = kGradDepth, int Threads = kGradThreads, int Ahead = kAhead>
__global__ void __launch_bounds__(Threads)
    layerNormParamGradColumns(double* __restrict__ dw, double* __restrict__ db, const double* __restrict__ dout,
                              const double* __restrict__ x, const double* __restrict__ mean,
                              const double* __restrict__ rstd, long long N, long long C) {
  using Tile = GradTile<Cols, Depth>;
  static_assert(sizeof(Tile) == sizeof(double) * Tile::kElements, "a tile's arrays lie one after another");
  constexpr int kCopiers = Threads - 32;
  constexpr int kFill = (Tile::kElements + kCopiers - 1) / kCopiers;  // loads a copier has in flight
  __shared__ Tile tiles[2];
  const int t = static_cast<int>(threadIdx.x);
  const long long c0 = static_cast<long long>(blockIdx.x) * Cols;
  const int cols = static_cast<int>(C - c0 < Cols ? C - c0 : Cols);
  const long long tileCount = (N + Depth - 1) / Depth;
  const auto depthOf = [&](long long k) {
    const long long left = N - k * Depth;
    return static_cast<int>(left < Depth ? left : Depth);
  };
  // Tile k into buffer k % 2 by the threads first, first + step, ... (element e of the buffer's
  // dout, x, mean, rstd in turn), a thread's loads all in flight before any store.
  const auto fill = [&](long long k, int first, int step) {
    double* into = &tiles[k % 2].dout[0][0];
    const long long r0 = k * Depth;
    const int depth = depthOf(k);
    double v[kFill];
    int at[kFill];
#pragma unroll
    for (int u = 0; u < kFill; ++u) {
      const int e = first + u * step;
      at[u] = -1;
      if (e < Tile::kTerms) {
        const int i = (e % (Depth * Cols)) / Cols, j = e % Cols;
        if (i < depth && j < cols) {
          const long long from = (r0 + i) * C + c0 + j;
          v[u] = e < Depth * Cols ? dout[from] : x[from];
          at[u] = e;
        }
      } else if (e < Tile::kElements) {
        const int i = (e - Tile::kTerms) % Depth;
        if (i < depth) {
          v[u] = e < Tile::kTerms + Depth ? mean[r0 + i] : rstd[r0 + i];
          at[u] = e;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kFill; ++u)
      if (at[u] >= 0) into[at[u]] = v[u];
  };
  if (tileCount > 0) fill(0, t, Threads);  // Threads x kFill cover a buffer
  __syncthreads();
  double dwAcc = 0.0, dbAcc = 0.0;
  for (long long k = 0; k < tileCount; ++k) {
    if (t < cols) {
      const Tile& tile = tiles[k % 2];
      walkInOrder<Ahead>(
          depthOf(k), [&](int i) { return Four{tile.dout[i][t], tile.x[i][t], tile.mean[i], tile.rstd[i]}; },
          [&](Four o) {
            const double norm = (o.x - o.mean) * o.rstd;
            dwAcc = __fma_rn(norm, o.dout, dwAcc);
            dbAcc = dbAcc + o.dout;
          });
    } else if (t >= 32 && k + 1 < tileCount) {
      fill(k + 1, t - 32, kCopiers);
    }
    __syncthreads();  // tile k is walked and tile k + 1 is in place
  }
  if (t < cols) {
    dw[c0 + t] = dwAcc;
    db[c0 + t] = dbAcc;
  }
}
}  // namespace

// layernormForward of handler H (a GpuCuda) in one launch; rows too long for the block's shared
// memory, and the empty shapes, take the reference.
template <class H>
osprey::Result<LayerNormOut<H>> layernormOneLaunch(H& h, const Buf<H>& x, const Buf<H>& w, const Buf<H>& b,
                                                   osprey::Index N, osprey::Index C) {
  if (C <= 0 || C > kLongestRow || N <= 0) return reference::layernormForward(h, x, w, b, N, C);
  const osprey::Index NC = OSPREY_TRY(detail::checkLayernormForward(h, x, w, b, N, C));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> out = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, NC));
  Buf<H> mean = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, N));
  Buf<H> rstd = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, N));
  const int perBlock = rowsPerBlock(C);
  const osprey::Index blocks = (N + perBlock - 1) / perBlock;
  const std::size_t shared = static_cast<std::size_t>(perBlock) * static_cast<std::size_t>(C + 1) * sizeof(double);
  OSPREY_CHECK(device->launchOwn("layernorm (one launch)", [&](cudaStream_t stream) {
    layerNormRows<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(out.data(), mean.data(), rstd.data(),
                                                                             x.data(), w.data(), b.data(), N, C,
                                                                             perBlock);
    return cudaGetLastError();
  }));
  return LayerNormOut<H>{std::move(out), std::move(mean), std::move(rstd)};
}

// layernormBackward of handler H: dx in one launch, dw and db in another; rows too long for the
// block's shared memory, and the empty shapes, take the reference.
template <class H>
osprey::Result<LayerNormGrads<H>> layernormBackwardOneLaunch(H& h, const Buf<H>& dout, const Buf<H>& x,
                                                             const Buf<H>& w, const Buf<H>& mean,
                                                             const Buf<H>& rstd, osprey::Index N, osprey::Index C) {
  if (C <= 0 || 2 * (C + 1) > kLongestRow + 1 || N <= 0)
    return reference::layernormBackward(h, dout, x, w, mean, rstd, N, C);
  const osprey::Index NC = OSPREY_TRY(detail::checkLayernormBackward(h, dout, x, w, mean, rstd, N, C));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  Buf<H> dx = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, NC));
  const int perBlock = rowsPerBlock(2 * (C + 1) - 1);  // two rows (dout's and x's) held per row
  const osprey::Index blocks = (N + perBlock - 1) / perBlock;
  const std::size_t shared = 2 * static_cast<std::size_t>(perBlock) * static_cast<std::size_t>(C + 1) * sizeof(double);
  OSPREY_CHECK(device->launchOwn("layernorm backward (one launch)", [&](cudaStream_t stream) {
    layerNormBackwardRows<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(
        dx.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C, perBlock);
    return cudaGetLastError();
  }));
  Buf<H> dw = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, C));
  Buf<H> db = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, C));
  const osprey::Index columnBlocks = (C + kGradCols - 1) / kGradCols;
  OSPREY_CHECK(device->launchOwn("layernorm backward: dw, db down the columns", [&](cudaStream_t stream) {
    layerNormParamGradColumns<<<static_cast<unsigned>(columnBlocks), kGradThreads, 0, stream>>>(
        dw.data(), db.data(), dout.data(), x.data(), mean.data(), rstd.data(), N, C);
    return cudaGetLastError();
  }));
  return LayerNormGrads<H>{std::move(dx), std::move(dw), std::move(db)};
}

}  // namespace gpt2::layernorm_rows
