// Sums over the rows that hold each token, for the fast handler: the embedding's backward and the
// lm head's target correction. nvcc units only.
//
//   out[v][c] = baseScale·base[v][c] + sumScale·Σ over rows n holding token v of src[n][c]
//                                                                  (n ascending, float)
//
// Each token's rows are found by sorting the rows by token with CUB's radix sort, which is stable,
// so they stay in ascending order: no atomics, the same bits on every run. A token's rows are
// summed in segments of kTokenSegment rows, each in ascending row order, and the segments' sums
// added in order: a token that fills one segment has the reference's order (layers/encoder.hpp
// gathers along the same list), and a frequent token (a newline, a comma: thousands of rows in a
// batch) is summed by many blocks at once instead of by one thread walking its whole run, which
// had held the pass to that run's length.
//
// The embedding backward also sums each position's rows across the sequences (positionSums).
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/token_sums.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <type_traits>

#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// Token v's rows, ascending: rows[start[v] .. end[v]); keys[i] the token of sorted row i < n.
struct TokenRuns {
  const int* rows;
  const int* start;
  const int* end;
  const int* keys;
  int n;
};

namespace {  // internal linkage: every unit launches its own copy (osprey/gpu/cuda/launch_faults.hpp says why)

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

// A token's rows are summed kTokenSegment at a time (the top of this file says why).
constexpr int kTokenSegment = 32;

// W consecutive channels of a row: a float, or a float4 (16-byte loads and stores, C a multiple of 4).
template <int W>
using Channels = std::conditional_t<W == 4, float4, float>;
__device__ __forceinline__ void addTo(float& a, float b) { a += b; }
__device__ __forceinline__ void addTo(float4& a, const float4& b) { a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w; }
__device__ __forceinline__ float scaledSum(float s, float a, float t, float b) { return s * a + t * b; }
__device__ __forceinline__ float4 scaledSum(float s, const float4& a, float t, const float4& b) {
  return {s * a.x + t * b.x, s * a.y + t * b.y, s * a.z + t * b.z, s * a.w + t * b.w};
}
__device__ __forceinline__ float scaled(float t, float b) { return t * b; }
__device__ __forceinline__ float4 scaled(float t, const float4& b) { return {t * b.x, t * b.y, t * b.z, t * b.w}; }

// partials[i] (C) = Σ src[rows[j]] over sorted positions j in [i, i + kTokenSegment) of i's
// token, ascending, for each i that starts a segment (kTokenSegment past its token's start); other
// rows of partials are not written. Grid (N, lane blocks); a thread holds W channels (Cw = C / W).
template <int W>
__global__ void __launch_bounds__(kTokenThreads)
    tokenSegmentSums(float* partials, const float* src, TokenRuns runs, int Cw) {
  using V = Channels<W>;
  const int i = static_cast<int>(blockIdx.x), l = static_cast<int>(blockIdx.y * kTokenThreads + threadIdx.x);
  const int key = runs.keys[i], first = runs.start[key];
  if ((i - first) % kTokenSegment != 0 || l >= Cw) return;
  const int last = min(i + kTokenSegment, runs.end[key]);
  const V* from = reinterpret_cast<const V*>(src) + l;
  V acc{};
#pragma unroll 8
  for (int j = i; j < last; ++j) addTo(acc, from[static_cast<long long>(runs.rows[j]) * Cw]);
  reinterpret_cast<V*>(partials)[static_cast<long long>(i) * Cw + l] = acc;
}

// out (V, C) = baseScale·base + sumScale·(token v's segment sums, in order); base may be out
// itself, or null (0). Each thread takes W channels of kTokenRowsEach consecutive tokens, so that
// enough loads are in flight for the pass to run at the memory's rate. Grid (token groups, lane
// blocks).
constexpr int kTokenRowsEach = 4;
template <int W>
__global__ void __launch_bounds__(kTokenThreads)
    tokenSumsKernel(float* out, const float* base, float baseScale, float sumScale, const float* partials,
                    TokenRuns runs, int Vn, int Cw) {
  using V = Channels<W>;
  const int l = static_cast<int>(blockIdx.y * kTokenThreads + threadIdx.x);
  const int v0 = static_cast<int>(blockIdx.x) * kTokenRowsEach;
  if (l >= Cw) return;
  const V* sums = reinterpret_cast<const V*>(partials) + l;
  V* to = reinterpret_cast<V*>(out) + l;
  const V* from = base ? reinterpret_cast<const V*>(base) + l : nullptr;
  V was[kTokenRowsEach];
#pragma unroll
  for (int r = 0; r < kTokenRowsEach; ++r)
    if (from && v0 + r < Vn) was[r] = from[static_cast<long long>(v0 + r) * Cw];
#pragma unroll
  for (int r = 0; r < kTokenRowsEach; ++r) {
    const int v = v0 + r;
    if (v >= Vn) break;
    V acc{};
    for (int i = runs.start[v]; i < runs.end[v]; i += kTokenSegment) addTo(acc, sums[static_cast<long long>(i) * Cw]);
    // (x·1 is x: the embedding's sums)
    to[static_cast<long long>(v) * Cw] = from ? scaledSum(baseScale, was[r], sumScale, acc) : scaled(sumScale, acc);
  }
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

// The float workspace of tokenSums: a segment's sums for each of the N sorted rows that may start one.
inline long long tokenSumsFloats(long long N, long long C) { return N * C; }

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
  runs = {sortedRows, start, end, sortedKeys, N};
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

// out (V, C) = baseScale·base + sumScale·Σ src[token v's rows] (see the top of this file);
// `partials` holds tokenSumsFloats(N, C).
inline cudaError_t tokenSums(cudaStream_t stream, float* out, const float* base, float baseScale, float sumScale,
                             const float* src, const TokenRuns& runs, float* partials, int V, int C) {
  if (V == 0 || C == 0) return cudaSuccess;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool wide = C % 4 == 0 && aligned(out) && aligned(base) && aligned(src) && aligned(partials);
  const auto launch = [&]<int W>(std::integral_constant<int, W>) {
    const int Cw = C / W;
    const unsigned laneBlocks = static_cast<unsigned>((Cw + kTokenThreads - 1) / kTokenThreads);
    if (runs.n > 0)
      tokenSegmentSums<W><<<dim3(static_cast<unsigned>(runs.n), laneBlocks), kTokenThreads, 0, stream>>>(
          partials, src, runs, Cw);
    tokenSumsKernel<W><<<dim3(static_cast<unsigned>((V + kTokenRowsEach - 1) / kTokenRowsEach), laneBlocks),
                         kTokenThreads, 0, stream>>>(out, base, baseScale, sumScale, partials, runs, V, Cw);
  };
  if (wide)
    launch(std::integral_constant<int, 4>{});
  else
    launch(std::integral_constant<int, 1>{});
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
