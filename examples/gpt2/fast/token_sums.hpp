// Sums over the rows that hold each token, for the fast handler: the embedding's backward and the
// lm head's target correction. nvcc units only.
//
//   out[v][c] = baseScale·base[v][c] + sumScale·Σ over rows n holding token v of src[n][c]
//                                                                  (n ascending, float)
//
// Each token's rows are found by sorting the rows by token with CUB's radix sort, which is stable,
// so they stay in ascending order and every sum has the reference's order (layers/encoder.hpp
// gathers along the same list): no atomics, the same bits on every run.
//
// The embedding backward also sums each position's rows across the sequences (positionSums).
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/token_sums.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// Token v's rows, ascending: rows[start[v] .. end[v]).
struct TokenRuns {
  const int* rows;
  const int* start;
  const int* end;
};

namespace {  // internal linkage: every unit launches its own copy (osprey/gpu/cuda.hpp says why)

constexpr int kTokenThreads = 256;

inline unsigned tokenBlocks(long long n) { return static_cast<unsigned>((n + kTokenThreads - 1) / kTokenThreads); }

// The key bits the sort looks at: enough for every id below V.
inline int tokenBits(int V) {
  int bits = 1;
  while (bits < 31 && (1LL << bits) < V) ++bits;
  return bits;
}

// keys[n] = ids[n] (already checked to be token indices), rows[n] = n.
__global__ void __launch_bounds__(kTokenThreads) tokenKeys(const float* ids, int* keys, int* rows, int N) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  keys[n] = static_cast<int>(ids[n]);
  rows[n] = n;
}

// After the sort, token v's rows are sorted[start[v] .. end[v]) (start and end zeroed before).
__global__ void __launch_bounds__(kTokenThreads) tokenRuns(const int* sortedKeys, int* start, int* end, int N) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= N) return;
  const int k = sortedKeys[i];
  if (i == 0 || sortedKeys[i - 1] != k) start[k] = i;
  if (i == N - 1 || sortedKeys[i + 1] != k) end[k] = i + 1;
}

// out (V, C) = baseScale·base + sumScale·(token v's rows of src, in ascending row order); base
// may be out itself, or null (0).
__global__ void __launch_bounds__(kTokenThreads)
    tokenSumsKernel(float* out, const float* base, float baseScale, float sumScale, const float* src, TokenRuns runs,
                    long long VC, int C) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= VC) return;
  const long long v = i / C, c = i % C;
  float acc = 0.0f;
  for (int j = runs.start[v]; j < runs.end[v]; ++j) acc += src[static_cast<long long>(runs.rows[j]) * C + c];
  out[i] = base ? baseScale * base[i] + sumScale * acc : sumScale * acc;  // (x·1 is x: the embedding's sums)
}

// dwpe (maxT, C): positions [P0, P0 + T) gather their rows across the B sequences; others are 0.
__global__ void __launch_bounds__(kTokenThreads)
    positionSumsKernel(float* dwpe, const float* dout, long long PC, int C, int T, int B, int P0) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= PC) return;
  const long long p = i / C, c = i % C;
  float acc = 0.0f;
  if (p >= P0 && p < P0 + T)
    for (int b = 0; b < B; ++b) acc += dout[(static_cast<long long>(b) * T + (p - P0)) * C + c];
  dwpe[i] = acc;
}

}  // namespace

// The int workspace of sortTokenRows: keys, rows and their sorted copies (N each), each token's
// run (V each).
inline long long tokenWorkspaceInts(long long N, long long V) { return 4 * N + 2 * V; }

// Bytes of CUB's scratch for sorting N keys below V.
inline cudaError_t tokenSortBytes(std::size_t& bytes, int N, int V, cudaStream_t stream) {
  return cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int*>(nullptr), static_cast<int*>(nullptr),
                                         static_cast<const int*>(nullptr), static_cast<int*>(nullptr), N, 0,
                                         tokenBits(V), stream);
}

// Each token's rows, from the checked ids (N): `ints` holds tokenWorkspaceInts(N, V), `scratch`
// tokenSortBytes' bytes.
inline cudaError_t sortTokenRows(cudaStream_t stream, TokenRuns& runs, const float* ids, int* ints, void* scratch,
                                 std::size_t scratchBytes, int N, int V) {
  int* keys = ints;
  int* rows = keys + N;
  int* sortedKeys = rows + N;
  int* sortedRows = sortedKeys + N;
  int* start = sortedRows + N;
  int* end = start + V;
  runs = {sortedRows, start, end};
  if (N > 0) {
    tokenKeys<<<tokenBlocks(N), kTokenThreads, 0, stream>>>(ids, keys, rows, N);
    if (const cudaError_t e = cub::DeviceRadixSort::SortPairs(scratch, scratchBytes, keys, sortedKeys, rows,
                                                              sortedRows, N, 0, tokenBits(V), stream);
        e != cudaSuccess)
      return e;
  }
  if (const cudaError_t e = cudaMemsetAsync(start, 0, 2 * static_cast<std::size_t>(V) * sizeof(int), stream);
      e != cudaSuccess)
    return e;
  if (N > 0) tokenRuns<<<tokenBlocks(N), kTokenThreads, 0, stream>>>(sortedKeys, start, end, N);
  return cudaGetLastError();
}

// out (V, C) = baseScale·base + sumScale·Σ src[token v's rows] (see the top of this file).
inline cudaError_t tokenSums(cudaStream_t stream, float* out, const float* base, float baseScale, float sumScale,
                             const float* src, const TokenRuns& runs, int V, int C) {
  const long long VC = static_cast<long long>(V) * C;
  if (VC > 0)
    tokenSumsKernel<<<tokenBlocks(VC), kTokenThreads, 0, stream>>>(out, base, baseScale, sumScale, src, runs, VC, C);
  return cudaGetLastError();
}

// dwpe (maxT, C) from dout (N = B·T rows at positions [P0, P0 + T)).
inline cudaError_t positionSums(cudaStream_t stream, float* dwpe, const float* dout, int N, int T, int C, int maxT,
                                int P0) {
  const long long PC = static_cast<long long>(maxT) * C;
  if (PC > 0) positionSumsKernel<<<tokenBlocks(PC), kTokenThreads, 0, stream>>>(dwpe, dout, PC, C, T, N / T, P0);
  return cudaGetLastError();
}

}  // namespace gpt2::fast_kernels
