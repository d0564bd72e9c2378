// The fast handler's embedding backward: the reference's gathers (layers/encoder.hpp), with the
// rows of each token found by a stable sort instead of a scan of every row per token. nvcc units
// only.
//
//   dwte[v][c] = base[v][c] + Σ over rows n holding token v of dout[n][c]   (n ascending, float)
//   dwpe[p][c] = Σ over b of dout[b·T + p - posOffset][c]                    (b ascending, float)
//
// The tokens' rows are sorted by token with CUB's radix sort, which is stable, so each token's rows
// stay in ascending order and every sum has the reference's order: no atomics, the same bits on
// every run.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/encoder_kernels.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "osprey/config.hpp"

namespace gpt2::fast_kernels {
namespace {  // internal linkage: every unit launches its own copy (osprey/gpu/cuda.hpp says why)

constexpr int kEncoderThreads = 256;

inline unsigned encoderBlocks(long long n) { return static_cast<unsigned>((n + kEncoderThreads - 1) / kEncoderThreads); }

// The key bits the sort looks at: enough for every id below V.
inline int tokenBits(int V) {
  int bits = 1;
  while (bits < 31 && (1LL << bits) < V) ++bits;
  return bits;
}

// keys[n] = ids[n] (already checked to be token indices), rows[n] = n.
__global__ void __launch_bounds__(kEncoderThreads) tokenKeys(const float* ids, int* keys, int* rows, int N) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  keys[n] = static_cast<int>(ids[n]);
  rows[n] = n;
}

// After the sort, token v's rows are sorted[start[v] .. end[v]) (start and end zeroed before).
__global__ void __launch_bounds__(kEncoderThreads) tokenRuns(const int* sortedKeys, int* start, int* end, int N) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= N) return;
  const int k = sortedKeys[i];
  if (i == 0 || sortedKeys[i - 1] != k) start[k] = i;
  if (i == N - 1 || sortedKeys[i + 1] != k) end[k] = i + 1;
}

// dwte (V, C): base (or 0) plus token v's rows of dout, in ascending row order.
__global__ void __launch_bounds__(kEncoderThreads)
    tokenSums(float* dwte, const float* base, const float* dout, const int* sortedRows, const int* start,
              const int* end, long long VC, int C) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= VC) return;
  const long long v = i / C, c = i % C;
  float acc = 0.0f;
  for (int j = start[v]; j < end[v]; ++j) acc += dout[static_cast<long long>(sortedRows[j]) * C + c];
  dwte[i] = base ? base[i] + acc : acc;
}

// dwpe (maxT, C): positions [P0, P0 + T) gather their rows across the B sequences; others are 0.
__global__ void __launch_bounds__(kEncoderThreads)
    positionSums(float* dwpe, const float* dout, long long PC, int C, int T, int B, int P0) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= PC) return;
  const long long p = i / C, c = i % C;
  float acc = 0.0f;
  if (p >= P0 && p < P0 + T)
    for (int b = 0; b < B; ++b) acc += dout[(static_cast<long long>(b) * T + (p - P0)) * C + c];
  dwpe[i] = acc;
}

}  // namespace

// The int workspace of encoderGradients: keys, rows and their sorted copies (N each), each
// token's run (V each).
inline long long encoderWorkspaceInts(long long N, long long V) { return 4 * N + 2 * V; }

// Bytes of CUB's scratch for sorting N keys below V.
inline cudaError_t encoderSortBytes(std::size_t& bytes, int N, int V, cudaStream_t stream) {
  return cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int*>(nullptr), static_cast<int*>(nullptr),
                                         static_cast<const int*>(nullptr), static_cast<int*>(nullptr), N, 0,
                                         tokenBits(V), stream);
}

// dwte (V, C) and dwpe (maxT, C) from dout (N, C) and the checked ids (N) of the forward's tokens.
// `ints` holds encoderWorkspaceInts(N, V); `scratch` encoderSortBytes' bytes.
inline cudaError_t encoderGradients(cudaStream_t stream, float* dwte, float* dwpe, const float* base,
                                    const float* dout, const float* ids, int* ints, void* scratch,
                                    std::size_t scratchBytes, int N, int T, int C, int V, int maxT, int P0) {
  int* keys = ints;
  int* rows = keys + N;
  int* sortedKeys = rows + N;
  int* sortedRows = sortedKeys + N;
  int* start = sortedRows + N;
  int* end = start + V;
  if (N > 0) {
    tokenKeys<<<encoderBlocks(N), kEncoderThreads, 0, stream>>>(ids, keys, rows, N);
    if (const cudaError_t e = cub::DeviceRadixSort::SortPairs(scratch, scratchBytes, keys, sortedKeys, rows,
                                                              sortedRows, N, 0, tokenBits(V), stream);
        e != cudaSuccess)
      return e;
  }
  if (const cudaError_t e = cudaMemsetAsync(start, 0, 2 * static_cast<std::size_t>(V) * sizeof(int), stream);
      e != cudaSuccess)
    return e;
  if (N > 0) tokenRuns<<<encoderBlocks(N), kEncoderThreads, 0, stream>>>(sortedKeys, start, end, N);
  const long long VC = static_cast<long long>(V) * C, PC = static_cast<long long>(maxT) * C;
  if (VC > 0)
    tokenSums<<<encoderBlocks(VC), kEncoderThreads, 0, stream>>>(dwte, base, dout, sortedRows, start, end, VC, C);
  if (PC > 0)
    positionSums<<<encoderBlocks(PC), kEncoderThreads, 0, stream>>>(dwpe, dout, PC, C, T, N / T, P0);
  return cudaGetLastError();
}

}  // namespace gpt2::fast_kernels
