// Where a block's time goes inside the replayed decoding graph, where no profiler sees the kernels
// overlap as they do there: a kernel's block takes marks (%globaltimer, and clock64 on its
// multiprocessor) at its phases and writes them as one record. Compiled in only in a build
// configured with -DOSPREY_BLOCK_TRACE=ON (a measurement build; tools/profile/block_trace.py reads
// its file); otherwise every call is empty and the kernels are the same code (the same PTX).
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/block_trace.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "osprey/gpu/cuda/kernels/warp_place.hpp"

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

constexpr int kTraceMarks = 6;
// One block's record: which launch (its kind and a tag, the address of what it reads that no other
// launch of the step reads), where it ran, and its marks (zero where it took none).
struct TraceRecord {
  std::uint64_t tag;
  std::uint32_t kind, block, sm, grid;
  std::uint64_t time[kTraceMarks];  // %globaltimer, ns
  std::int64_t cycles[kTraceMarks];  // clock64 of the block's multiprocessor
};
static_assert(sizeof(TraceRecord) == 120, "tools/profile/block_trace.py reads records of 120 bytes");
enum TraceKind : std::uint32_t {
  kTraceRow = 1,
  kTraceAttention = 2,
  kTraceNormalise = 3,
  kTraceBounds = 4,
  kTraceChoice = 5,
};

#if defined(OSPREY_BLOCK_TRACE)
__device__ TraceRecord* traceRecords;
__device__ unsigned traceCapacity;
__device__ unsigned traceNext;
#endif

// A block's marks, in its shared memory: the tracing thread writes them as it passes, so they hold
// no registers of the code they time.
struct TraceMarks {
  std::uint64_t time[kTraceMarks];
  std::int64_t cycles[kTraceMarks];
};
__device__ __forceinline__ TraceMarks& traceMarks() {
  __shared__ TraceMarks marks;
  return marks;
}

// The block's trace: made at the kernel's start, where thread 0 clears the marks a kernel may not
// take (shared memory holds what an earlier block left) and takes mark 0; open(tracer) names the
// tracing thread, which, where the ring is given (traceStart), takes the block's record slot (a
// ring: the last records stay), every later mark<I>() and close(), which writes the record. The
// tracing thread sees thread 0's mark after a barrier between them.
struct BlockTrace {
#if defined(OSPREY_BLOCK_TRACE)
  bool on = false;
  unsigned slot = 0;

  template <int I>
  __device__ __forceinline__ static void take() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    traceMarks().time[I] = t;
    traceMarks().cycles[I] = clock64();
  }
  __device__ BlockTrace() {
    if (threadIdx.x != 0) return;
    for (int i = 1; i < kTraceMarks; ++i) {
      traceMarks().time[i] = 0;
      traceMarks().cycles[i] = 0;
    }
    take<0>();
  }
#endif
  __device__ __forceinline__ void open([[maybe_unused]] bool tracer) {
#if defined(OSPREY_BLOCK_TRACE)
    on = tracer && traceCapacity != 0;
    if (on) slot = atomicAdd(&traceNext, 1u) % traceCapacity;
#endif
  }
  template <int I>
  __device__ __forceinline__ void mark() {
#if defined(OSPREY_BLOCK_TRACE)
    if (on) take<I>();
#endif
  }
  __device__ __forceinline__ void close([[maybe_unused]] TraceKind kind, [[maybe_unused]] const void* tag) {
#if defined(OSPREY_BLOCK_TRACE)
    if (!on) return;
    TraceRecord& r = traceRecords[slot];
    const unsigned sm = multiprocessorId();
    r.tag = reinterpret_cast<std::uint64_t>(tag);
    r.kind = kind;
    r.block = blockIdx.x;
    r.sm = sm;
    r.grid = gridDim.x;
    for (int i = 0; i < kTraceMarks; ++i) {
      r.time[i] = traceMarks().time[i];
      r.cycles[i] = traceMarks().cycles[i];
    }
#endif
  }
};

// Host side, for the decoding loop: traceStart() gives the kernels a ring of records when
// OSPREY_BLOCK_TRACE (the environment variable) names a file, traceFinish() writes the ring there
// (the records, then nothing else; tools/profile/block_trace.py reads it). Without the build's
// OSPREY_BLOCK_TRACE both do nothing.
inline void traceStart() {
#if defined(OSPREY_BLOCK_TRACE)
  if (std::getenv("OSPREY_BLOCK_TRACE") == nullptr) return;
  const unsigned capacity = 1u << 17;  // 15 MiB: about nine tokens of 124M
  TraceRecord* records = nullptr;
  if (cudaMalloc(&records, sizeof(TraceRecord) * capacity) != cudaSuccess ||
      cudaMemset(records, 0, sizeof(TraceRecord) * capacity) != cudaSuccess)
    return;
  const unsigned zero = 0;
  cudaMemcpyToSymbol(traceRecords, &records, sizeof records);
  cudaMemcpyToSymbol(traceNext, &zero, sizeof zero);
  cudaMemcpyToSymbol(traceCapacity, &capacity, sizeof capacity);
#endif
}
inline void traceFinish() {
#if defined(OSPREY_BLOCK_TRACE)
  const char* path = std::getenv("OSPREY_BLOCK_TRACE");
  unsigned capacity = 0, next = 0;
  TraceRecord* records = nullptr;
  if (path == nullptr || cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpyFromSymbol(&capacity, traceCapacity, sizeof capacity) != cudaSuccess || capacity == 0)
    return;
  cudaMemcpyFromSymbol(&next, traceNext, sizeof next);
  cudaMemcpyFromSymbol(&records, traceRecords, sizeof records);
  std::vector<TraceRecord> host(capacity);
  cudaMemcpy(host.data(), records, sizeof(TraceRecord) * capacity, cudaMemcpyDeviceToHost);
  // The ring goes with its file: the next decoding (traceStart) gives a fresh one.
  const unsigned none = 0;
  cudaMemcpyToSymbol(traceCapacity, &none, sizeof none);
  cudaFree(records);
  std::FILE* f = std::fopen(path, "wb");
  if (f == nullptr || std::fwrite(host.data(), sizeof(TraceRecord), capacity, f) != capacity) {
    std::fprintf(stderr, "block trace: cannot write %s\n", path);
    if (f != nullptr) std::fclose(f);
    return;
  }
  std::fclose(f);
  std::fprintf(stderr, "block trace: %u blocks, the last %u written to %s\n", next, capacity, path);
#endif
}

}  // namespace
}  // namespace osprey::cuda_detail
