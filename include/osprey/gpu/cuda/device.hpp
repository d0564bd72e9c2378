// The `cuda` device runtime: GPU-surface kernels run on an NVIDIA GPU (compiled by nvcc only).
//
// Mirrors host.hpp member for member (open, name, allocate/release, upload/download/readOne,
// forEach, fold, indexOf, matMul), so the two can be diffed; foldRows (row folds, ordered;
// or as trees for the fast handler's regroupable sums and maxima) and matMulBatched (products of
// one shape in one launch) are its additions, which the host answers with the reference
// definitions instead. The kernels are the
// model's own kernels, compiled for the device from the same source: forEach launches body(i)
// over a grid.
//
// Contract, as on the host (DESIGN.md §4): parallelism over independent outputs only. fold stays
// a sequential left fold in element order; matMul (src/gpu/cuda/matmul.cu) tiles rows and columns
// across blocks, warps and tensor-core fragments but accumulates each output as one chain of fused
// multiply-adds in k order from +0.0. The results are bit-identical to lists and gpu/host.
//
// Failures are Errors, never a quiet run elsewhere: open() without a GPU says so (no fallback to
// the host), every CUDA call goes through OSPREY_CUDA_CHECK, and every launch is checked.
//
// Asynchronous launches, deferred fault checks. Every launch goes onto the device's one stream (the
// legacy default stream, unless a handler recording a CUDA graph has set its own: setStream) and
// returns at once: a host synchronisation per launch (tens of microseconds) would cost
// more than most of the model's kernels take to run, and one-token decoding launches hundreds of
// them. A `strictly` fault recorded inside a kernel (strict.hpp's fault slot) is therefore found
// when the host next has to wait for the device anyway: a read-back (get/readOne, download/
// fromGpu, a fold's result, indexOf) or an explicit flush(). That operation returns the fault as
// its Error, in the host's words followed by the kernel that faulted:
//
//   integer overflow: 9223372036854775807 * 2 (in forEach<osprey::BuildBody<…>> over 10000
//   elements, launch 3 on this device; found at download of 10000 doubles)
//
// How the first faulting kernel is named without a synchronisation per launch: every launch that
// can fault gets a number (1, 2, ...), and the host keeps the labels of the last kLaunchRecords
// launches in a ring. The kernel takes its number as an argument, and each thread, before it
// exits, stamps the number into the unit's `fault launch` word if the fault slot is set and the
// word is still 0. Kernels on one stream run one after another, so the thread that recorded the
// fault stamps its own kernel's number before any later kernel starts: the stamp names the first
// faulting launch. Work after a fault keeps running on whatever the faulting kernel produced; its
// results are never handed out, because the read-back that would hand them out returns the fault.
//
// OSPREY_CUDA_CHECK_EACH_LAUNCH=1 (or setCheckEachLaunch(true)) restores the synchronous
// behaviour: each launch waits for its kernel, and the launching operation itself returns the
// fault, in exactly the host's words. It is for debugging and for tests of that contract.
//
// Memory reuse without synchronisation: a released block can still be read by kernels queued
// before its release. The cache hands it out again at once anyway, which is safe because all
// work is on one stream: whatever writes the block next is queued after every earlier reader.
// Only giving blocks back to the driver (cudaFree) waits for the device first.
//
// Why the launch helpers below sit in an unnamed namespace: strict.hpp's fault slot is a `static
// __device__` variable, one per translation unit (nvcc compiles each .cu as a whole program), and
// a kernel writes the slot of the module it was compiled into. If the kernel templates had
// external linkage, two .cu files instantiating forEachKernel<SameBody> would have their host
// stubs merged by the linker, and the launch could run one unit's kernel while reading the other
// unit's slot, losing the fault. With internal linkage every unit launches its own kernels; each
// unit's slot and stamp are registered with the device on the unit's first launch, and a check
// reads every registered unit's slot.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/device.hpp is compiled by nvcc only (a .cu file); host code reaches the cuda device through under()"
#endif

#include <cuda_runtime.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "osprey/block_layout.hpp"
#include "osprey/config.hpp"
#include "osprey/effect.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/gpu/size_class.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#include "osprey/view.hpp"

namespace osprey {

// Which tensor-core kernel a large exact product runs: Chosen, the fastest for the shape of the own
// kernel's estimated best tiling and the cuBLASLt algorithms verified to give its bits
// (osprey/gpu/cuda/exact_lt.hpp), or one tiling of the own kernel named, for tests and benchmarks
// that compare them (Square128Deep,
// 128 x 128 tiles with k in 32-deep slices, is never chosen: it is there to be measured). Every
// tiling gives the same bits; products with at most 8 rows, or at most 8 columns and fewer columns
// than rows, run on their own CUDA-core kernels whatever is asked.
enum class ExactTiling : int { Chosen = -1, Square128, Wide128x144, Middle128x96, Small64, Square128Deep };

// The exact product (src/gpu/cuda/matmul.cu): out (rows x cols) = a (rows x inner) * b (inner x
// cols), row-major, each output the fma chain over k ascending from +0.0, queued on `stream` of
// the current device. Returns the launch status (cudaGetLastError after the launches); it does not
// wait for the kernel.
cudaError_t launchExactMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                              Index cols, int multiprocessors, cudaStream_t stream,
                              ExactTiling tiling = ExactTiling::Chosen);
// `batch` such products of one shape stored one after another (out, a and b each advance by one
// product's elements per product); bit for bit `batch` calls of launchExactMatMul.
cudaError_t launchExactMatMulBatched(Scalar* out, const Scalar* a, const Scalar* b, Index batch, Index rows,
                                     Index inner, Index cols, int multiprocessors, cudaStream_t stream,
                                     ExactTiling tiling = ExactTiling::Chosen);

class CudaDevice;

namespace cuda_detail {

// Where one translation unit's fault slot and fault-launch stamp live on the device.
struct UnitAddresses {
  DeviceFault* fault = nullptr;
  unsigned long long* launch = nullptr;
};

// What the host copies back from one unit's slot at a check (pinned memory, so the copy can be
// queued behind the kernels and waited for with the same synchronisation as the data).
struct SlotReadback {
  DeviceFault fault;
  unsigned long long launch;
};

// How a launch is named in an error; called only when that launch faulted.
using LabelFunction = std::string (*)();

namespace {  // internal linkage: see the header comment

constexpr int kThreadsPerBlock = 256;

// The number of the first launch of this unit whose thread recorded a fault (0: none yet).
__device__ unsigned long long faultLaunch;

// Before a thread exits: if the slot holds a fault and no launch has claimed it yet, it was this
// launch (kernels on the stream run one after another, and the recording thread itself gets here
// before its kernel ends). The volatile reads see memory, not a stale cached copy; reading the
// stamp before the atomic keeps the threads of later launches (until the fault is reported) from
// all queueing on one atomic.
__device__ __forceinline__ void stampFault(unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  if (*static_cast<volatile int*>(&osprey_device_fault.kind) != 0 &&
      *static_cast<volatile unsigned long long*>(&faultLaunch) == 0)
    atomicCAS(&faultLaunch, 0ull, launch);
#endif
}

// body(i) for every i in [0, n): a grid-stride loop, so any n fits any grid.
template <class Body>
__global__ void __launch_bounds__(kThreadsPerBlock) forEachKernel(Index n, Body body, unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  // In the device pass the closure is the lambda's own type (the host pass sees nvcc's wrapper),
  // so this is where an owning capture (a vector, a string, a buffer handle) is caught.
  static_assert(std::is_trivially_copyable_v<Body>,
                "a kernel closure must be trivially copyable: capture Views and scalars by value, "
                "never owning handles (vectors, strings, buffers)");
#endif
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    body(i);
  stampFault(launch);
}

// The left fold: combine(...combine(seed, v[0])..., v[n-1]). combine is arbitrary (not
// associative, not commutative: float addition is not associative), so the contract fixes the
// order, and one thread applies it. That thread would spend most of its time waiting on memory if
// it loaded the elements itself (each load a few hundred cycles, and one thread keeps few in
// flight), so the whole block streams chunks of the input into shared memory with asynchronous
// copies, one chunk ahead, while thread 0 folds the chunk before it from shared memory.
constexpr int kFoldThreads = 256;
constexpr int kFoldChunk = 2048;  // elements per chunk; two chunks = 32 KiB of shared memory

template <class T>
__device__ __forceinline__ void copyElementAsync(T* dst, const T* src) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp.async copies 4, 8 or 16 bytes");
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(shared), "l"(src), "n"(sizeof(T)) : "memory");
}

template <class T, class C>
__global__ void __launch_bounds__(kFoldThreads)
    foldKernel(ViewOf<T> v, Scalar seed, C combine, Scalar* out, unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  static_assert(std::is_trivially_copyable_v<C>,
                "a combine closure must be trivially copyable: capture Views and scalars by value, "
                "never owning handles (vectors, strings, buffers)");
#endif
  __shared__ T chunk[2][kFoldChunk];
  const int tid = static_cast<int>(threadIdx.x);
  const Index chunks = (v.n + kFoldChunk - 1) / kFoldChunk;
  // Queue the copies of chunk c into buffer c % 2 (one commit group per call, possibly empty).
  auto fetch = [&](Index c) {
    if (c < chunks) {
      const Index first = c * kFoldChunk;
      const Index count = v.n - first < kFoldChunk ? v.n - first : kFoldChunk;
      for (Index e = tid; e < count; e += kFoldThreads) copyElementAsync(&chunk[c % 2][e], v.data + first + e);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  Scalar acc = seed;
  fetch(0);
  for (Index c = 0; c < chunks; ++c) {
    fetch(c + 1);  // buffer (c + 1) % 2 was left by thread 0 before the barrier ending step c - 1
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // chunk c has landed (for this thread)
    __syncthreads();                                         // ... and for every thread
    if (tid == 0) {
      const T* values = chunk[c % 2];
      const Index first = c * kFoldChunk;
      const int count = static_cast<int>(v.n - first < kFoldChunk ? v.n - first : kFoldChunk);
#pragma unroll 8
      for (int e = 0; e < count; ++e) acc = combine(acc, static_cast<Scalar>(values[e]));
    }
    __syncthreads();  // thread 0 is done with buffer c % 2 before it is refilled
  }
  if (tid == 0) *out = acc;
  stampFault(launch);
}

// Row folds (gpt2/layers/fold_rows.hpp): out[r] = finish(r, the in-order fold of term(r, c) over
// c), one block per row (rows beyond the grid taken in turn). The block computes a chunk of the
// row's terms into shared memory, all threads at once for the first chunk; then thread 0 combines
// the chunk in order while warps 1.. compute the next chunk into the other buffer. The terms do
// not depend on the accumulator, so computing them early and in parallel leaves the fold's
// combines, and its bits, those of one thread walking the row.
// A row's time is its one thread's chain of combines, so what pays is many rows at once: small
// blocks (one warp combining and filling, one filling), 32 of them a multiprocessor (its most).
constexpr int kRowFoldThreads = 64;
constexpr int kRowFoldChunkBytes = 2048;  // one chunk of terms; two chunks = 4 KiB of shared memory
constexpr int kRowFoldBlocksPerProcessor = 32;

template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kRowFoldThreads)
    rowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                  unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  static_assert(std::is_trivially_copyable_v<L> && std::is_trivially_copyable_v<T> &&
                    std::is_trivially_copyable_v<C> && std::is_trivially_copyable_v<F>,
                "row-fold closures must be trivially copyable: capture Views and scalars by value, never owning "
                "handles (vectors, strings, buffers)");
#endif
  // A term is a Scalar, or what the combine takes besides the accumulator (a dot product's two
  // factors: gpt2/layers/fold_rows.hpp).
  using Value = decltype(term(Index{}, Index{}));
  constexpr int kRowFoldChunk = kRowFoldChunkBytes / static_cast<int>(sizeof(Value));
  __shared__ Value terms[2][kRowFoldChunk];
  const int tid = static_cast<int>(threadIdx.x);
  Index cols = 0, chunks = 0;  // of the current row
  const auto chunkLength = [&](Index k) -> int {
    const Index left = cols - k * kRowFoldChunk;
    return static_cast<int>(left < kRowFoldChunk ? left : kRowFoldChunk);
  };
  // Terms of chunk k of row r into buffer k % 2, by the threads first, first + step, ...
  const auto fill = [&](Index r, Index k, int first, int step) {
    Value* into = terms[k % 2];
    const Index from = k * kRowFoldChunk;
    const int count = chunkLength(k);
    for (int e = first; e < count; e += step) into[e] = term(r, from + e);
  };
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    cols = length(r);
    chunks = (cols + kRowFoldChunk - 1) / kRowFoldChunk;
    if (chunks > 0) fill(r, 0, tid, kRowFoldThreads);
    __syncthreads();
    Scalar acc = seed;
    for (Index k = 0; k < chunks; ++k) {
      if (tid == 0) {
        const Value* values = terms[k % 2];
        const int count = chunkLength(k);
        int e = 0;
        if constexpr (std::is_same_v<Value, Scalar>) {
          if (k == 0 && fromFirst) acc = values[e++];
        }
#pragma unroll 8
        for (; e < count; ++e) acc = combine(acc, values[e]);
      } else if (tid >= 32 && k + 1 < chunks) {
        fill(r, k + 1, tid - 32, kRowFoldThreads - 32);
      }
      __syncthreads();  // chunk k is combined and chunk k + 1 is in place
    }
    if (tid == 0) out[r] = static_cast<Out>(finish(r, acc));
  }
  stampFault(launch);
}

// The same row folds with one row a lane, for many rows (softmax statistics: a row per query of
// every head): each warp folds 32 consecutive rows, lane l row r0 + l, in order, from a shared
// tile of kLaneFoldChunk terms a row that the whole warp fills first (term (r0 + i, k0 + j) by the
// lane that owns tile element i·kLaneFoldChunk + j, so neighbouring lanes read neighbouring
// columns). A block per row leaves thread 0 combining while 255 threads idle; here every lane
// combines. Each row's combines are still the one thread's, in column order, so the bits are
// rowFoldKernel's.
constexpr int kLaneFoldWarps = 4;
constexpr int kLaneFoldThreads = 32 * kLaneFoldWarps;
constexpr int kLaneFoldChunk = 16;  // terms of each row per tile; 32 x 17 Values a warp
// Lanes only pay where there are rows enough for several warps on every multiprocessor: fewer,
// longer rows (a LayerNorm's, the cross-entropy's 50,257 logits) keep a block a row, whose
// threads fetch one row's terms far ahead of its single combining thread.
constexpr Index kLaneFoldRowsPerProcessor = 4 * 32;  // four warps a multiprocessor
constexpr int kLaneFoldBlocksPerProcessor = 8;

template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kLaneFoldThreads)
    laneRowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                      unsigned long long launch) {
  using Value = decltype(term(Index{}, Index{}));
  __shared__ Value tiles[kLaneFoldWarps][32][kLaneFoldChunk + 1];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  Value (*tile)[kLaneFoldChunk + 1] = tiles[warp];
  const Index warps = static_cast<Index>(gridDim.x) * kLaneFoldWarps;
  for (Index group = static_cast<Index>(blockIdx.x) * kLaneFoldWarps + warp; group * 32 < rows; group += warps) {
    const Index r0 = group * 32, r = r0 + lane;
    const Index cols = r < rows ? length(r) : 0;
    Index most = cols;  // the longest row of the warp's 32
    for (int offset = 16; offset > 0; offset /= 2) {
      const Index other = __shfl_xor_sync(0xffffffffu, most, offset);
      most = other > most ? other : most;
    }
    Scalar acc = seed;
    for (Index k0 = 0; k0 < most; k0 += kLaneFoldChunk) {
      for (int e = lane; e < 32 * kLaneFoldChunk; e += 32) {
        const int i = e / kLaneFoldChunk, j = e % kLaneFoldChunk;
        const Index rowCols = __shfl_sync(0xffffffffu, cols, i);
        if (k0 + j < rowCols) tile[i][j] = term(r0 + i, k0 + j);
      }
      __syncwarp();
      const Index left = cols - k0;
      const int count = left <= 0 ? 0 : left < kLaneFoldChunk ? static_cast<int>(left) : kLaneFoldChunk;
      int e = 0;
      if constexpr (std::is_same_v<Value, Scalar>) {
        if (k0 == 0 && fromFirst && count > 0) acc = tile[lane][e++];
      }
      for (; e < count; ++e) acc = combine(acc, tile[lane][e]);
      __syncwarp();  // the tile is read before the warp refills it
    }
    if (r < rows) out[r] = static_cast<Out>(finish(r, acc));
  }
  stampFault(launch);
}

constexpr int kTreeFoldThreads = 256;
constexpr int kTreeFoldWarps = kTreeFoldThreads / 32;
constexpr int kTreeFoldBlocksPerProcessor = 16;

// The same row folds for a Regroupable combine (effect.hpp; the fast handler asks for it), folded
// as a tree: thread t folds terms t, t + 256, ...; the warps fold their threads' partials by shuffles;
// thread 0 folds the warps' partials and the seed. A thread with no term holds nothing (`has`
// false), so no identity element is needed (max has none in the doubles that include NaN).
template <class Out, class L, class T, class C, class F>
__global__ void __launch_bounds__(kTreeFoldThreads)
    treeRowFoldKernel(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish,
                      unsigned long long launch) {
  __shared__ Scalar partial[kTreeFoldWarps];
  __shared__ bool held[kTreeFoldWarps];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  for (Index r = blockIdx.x; r < rows; r += gridDim.x) {
    const Index cols = length(r);
    Scalar acc = 0.0;
    bool has = false;
    for (Index c = tid; c < cols; c += kTreeFoldThreads) {
      const Scalar v = term(r, c);
      acc = has ? combine(acc, v) : v;
      has = true;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const Scalar other = __shfl_down_sync(0xffffffffu, acc, offset);
      const bool otherHas = __shfl_down_sync(0xffffffffu, has, offset);
      if (otherHas) {
        acc = has ? combine(acc, other) : other;
        has = true;
      }
    }
    if (lane == 0) {
      partial[warp] = acc;
      held[warp] = has;
    }
    __syncthreads();
    if (tid == 0) {
      Scalar total = 0.0;
      bool any = false;
      for (int w = 0; w < kTreeFoldWarps; ++w) {
        if (!held[w]) continue;
        total = any ? combine(total, partial[w]) : partial[w];
        any = true;
      }
      const Scalar folded = !any ? seed : fromFirst ? total : combine(seed, total);
      out[r] = static_cast<Out>(finish(r, folded));
    }
    __syncthreads();  // partial[] is free for the next row
  }
  stampFault(launch);
}

// out (blocks, rows, cols) = the blocks of src that `layout` describes, 32 x 32 tiles at a time
// through shared memory: the tile is read along the source's unit stride (down its rows when
// alongRows, a transpose) and written along the copy's rows, so both sides coalesce. Only copies.
constexpr int kCopyTile = 32;
constexpr int kCopyThreads = 256;  // 32 x 8: each thread moves four elements of a tile
constexpr int kCopyBlocksPerProcessor = 16;

template <class T>
__global__ void __launch_bounds__(kCopyThreads)
    copyBlocksKernel(T* out, const T* src, BlockLayout layout, Index blocks, Index rows, Index cols, bool alongRows) {
  __shared__ T tile[kCopyTile][kCopyTile + 1];
  const int tx = static_cast<int>(threadIdx.x) % kCopyTile, ty = static_cast<int>(threadIdx.x) / kCopyTile;
  constexpr int kPass = kCopyThreads / kCopyTile;
  const Index tilesC = (cols + kCopyTile - 1) / kCopyTile, perBlock = tilesC * ((rows + kCopyTile - 1) / kCopyTile);
  for (Index t = blockIdx.x; t < blocks * perBlock; t += gridDim.x) {
    const Index z = t / perBlock, within = t % perBlock;
    const Index r0 = within / tilesC * kCopyTile, c0 = within % tilesC * kCopyTile, start = layout.start(z);
    for (int k = ty; k < kCopyTile; k += kPass) {
      const int rl = alongRows ? tx : k, cl = alongRows ? k : tx;
      const Index r = r0 + rl, c = c0 + cl;
      if (r < rows && c < cols) tile[rl][cl] = src[start + r * layout.rowStride + c * layout.colStride];
    }
    __syncthreads();
    for (int k = ty; k < kCopyTile; k += kPass) {
      const Index r = r0 + k, c = c0 + tx;
      if (r < rows && c < cols) out[(z * rows + r) * cols + c] = tile[k][tx];
    }
    __syncthreads();  // the tile is written out before the next is read in
  }
}

// Every thread walks its grid-stride indices in ascending order and stops at its first hit; the
// smallest hit over all threads wins through atomicMin. *best starts at n ("not found").
template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock) indexOfKernel(ViewOf<T> v, Scalar x, long long* best) {
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < v.n; i += stride) {
    if (static_cast<Scalar>(v.data[i]) == x) {
      atomicMin(best, static_cast<long long>(i));
      return;
    }
  }
}

// A readable kernel label for errors: "forEach<osprey::BuildBody<…>>".
template <class T>
std::string kernelLabel(const char* kernel) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, &status);
  std::string type = status == 0 && demangled ? demangled : typeid(T).name();
  std::free(demangled);
  constexpr std::size_t kLongest = 160;
  if (type.size() > kLongest) type = type.substr(0, kLongest) + "…";
  return fmt::format("{}<{}>", kernel, type);
}
template <class Body>
std::string forEachLabel() {
  return kernelLabel<Body>("forEach");
}
template <class C>
std::string foldLabel() {
  return kernelLabel<C>("fold");
}
template <class T>
std::string rowFoldLabel() {
  return kernelLabel<T>("foldRows");
}
template <class T>
std::string treeFoldLabel() {
  return kernelLabel<T>("foldRows (tree)");
}

// This unit's slot and stamp on the current device (each device loads its own copy of the module).
inline Result<UnitAddresses> thisUnitAddresses() {
  void* fault = nullptr;
  void* launch = nullptr;
  OSPREY_CUDA_CHECK(cudaGetSymbolAddress(&fault, osprey_device_fault), "finding the fault slot");
  OSPREY_CUDA_CHECK(cudaGetSymbolAddress(&launch, faultLaunch), "finding the fault-launch stamp");
  return UnitAddresses{static_cast<DeviceFault*>(fault), static_cast<unsigned long long*>(launch)};
}
// Its address names this translation unit.
const char thisUnit = 0;

// Blocks for a grid-stride launch over n elements: enough to fill the GPU, never more than n needs.
inline unsigned blocksFor(Index n, int multiprocessors) {
  const Index needed = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const Index filling = static_cast<Index>(multiprocessors) * 32;
  return static_cast<unsigned>(needed < filling ? needed : filling);
}

}  // namespace
}  // namespace cuda_detail

class CudaDevice {
 public:
  // The GPU OSPREY_CUDA_DEVICE names (default 0), or an Error saying why it cannot be had. There is
  // no fallback: a machine without a GPU or driver gets an error, never the host.
  static Result<std::shared_ptr<CudaDevice>> open() {
    const int index = OSPREY_TRY(requestedIndex());
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      return Error{fmt::format("no CUDA device: cudaGetDeviceCount failed: {} ({}) — run on a machine "
                               "with an NVIDIA GPU or choose OSPREY_GPU=host",
                               cudaGetErrorString(status), cudaGetErrorName(status))};
    }
    if (count == 0)
      return Error{"no CUDA device: the driver reports none — run on a machine with an NVIDIA GPU or "
                   "choose OSPREY_GPU=host"};
    if (index >= count)
      return Error{fmt::format("no CUDA device {} (OSPREY_CUDA_DEVICE): this machine has {} (0..{}) — "
                               "choose one of those, or unset OSPREY_CUDA_DEVICE",
                               index, count, count - 1)};
    static std::mutex opening;
    static std::map<int, std::shared_ptr<CudaDevice>> opened;
    std::lock_guard lock(opening);
    auto& device = opened[index];
    if (!device) {
      OSPREY_CUDA_CHECK(cudaSetDevice(index), fmt::format("opening device {}", index));
      cudaDeviceProp properties{};
      OSPREY_CUDA_CHECK(cudaGetDeviceProperties(&properties, index), fmt::format("opening device {}", index));
      OSPREY_CUDA_CHECK(cudaFree(nullptr), fmt::format("creating a context on device {}", index));
      void* staging = nullptr;
      OSPREY_CUDA_CHECK(cudaMallocHost(&staging, sizeof(Staging)), "allocating pinned read-back memory");
      device.reset(new CudaDevice(index, properties, static_cast<Staging*>(staging)));
    }
    return device;
  }

  std::string name() const { return m_name; }

  // Whether each launch waits for its kernel and returns its fault itself (see the header
  // comment); false unless OSPREY_CUDA_CHECK_EACH_LAUNCH=1 was set when the device was opened.
  bool checksEachLaunch() const { return m_checkEachLaunch; }
  void setCheckEachLaunch(bool each) { m_checkEachLaunch = each; }

  // Waits for everything queued on the device and returns the first kernel fault among it (or a
  // CUDA error a kernel raised), naming the kernel. Reads call this themselves; call it where a
  // run must know that its queued work succeeded without reading anything back.
  Result<void> flush() {
    OSPREY_CHECK(activate());
    return settle("flush");
  }

  // Device memory, from a cache of released blocks keyed by exact byte size (cudaMalloc and
  // cudaFree cost tens of microseconds, and cudaFree synchronises the whole device; the model
  // allocates the same few sizes over and over). A released block is handed out again at once,
  // even if queued kernels still read it (stream order makes that safe: see the header comment).
  // When cudaMalloc runs out of memory, the cache is given back and the allocation tried once more.
  // T is the element type (doubles unless a handler stores less).
  template <class T = Scalar>
  Result<T*> allocate(Index n) {
    return static_cast<T*>(OSPREY_TRY(allocateBytes(n, sizeof(T), elementName<T>())));
  }
  void release(const void* p) {
    if (!p) return;
    std::lock_guard lock(m_cacheLock);
    auto live = m_live.find(p);
    if (live == m_live.end()) return;  // not ours; never happens through GpuBuffer
    if (m_holding) {  // still live: a recorded graph's kernels write it on every replay
      m_held.push_back(p);
      return;
    }
    m_idle[live->second].push_back(const_cast<void*>(p));
    m_cachedBytes += live->second;
    m_liveBytes -= live->second;
    m_live.erase(live);
  }

  // While held, released blocks stay live instead of going back to the cache: a CUDA graph replays
  // its recording's kernels onto the very blocks they used, including blocks whose buffers were
  // released during the recording, so no other buffer may be handed those blocks until the graph
  // is gone. Ending the hold releases them.
  void holdReleases(bool hold) {
    std::vector<const void*> held;
    {
      std::lock_guard lock(m_cacheLock);
      m_holding = hold;
      if (!hold) held.swap(m_held);
    }
    for (const void* p : held) release(p);
  }

  // The stream every launch, copy and wait of this device goes to: the legacy default stream
  // (nullptr) unless set. A CUDA graph is recorded from a stream of its own (the legacy stream
  // cannot be captured); the handler that records sets it for the recording and its replays, and
  // sets nullptr again after. Not for concurrent use: one stream for everything is what makes the
  // deferred fault checks and the block reuse above safe.
  cudaStream_t stream() const { return m_stream; }
  void setStream(cudaStream_t stream) { m_stream = stream; }

  // From pageable host memory: cudaMemcpy queues the copy behind the launches on the stream (and
  // returns once the source has been staged), so no check is needed here.
  template <class T>
  Result<void> upload(T* dst, const T* src, Index n) {
    if (n == 0) return {};
    OSPREY_CHECK(activate());
    OSPREY_CUDA_CHECK(cudaMemcpy(dst, src, bytesOf<T>(n), cudaMemcpyHostToDevice),
                      fmt::format("upload of {} {}", n, elementName<T>()));
    return {};
  }
  // The host reads: everything queued first completes and is checked for faults.
  template <class T>
  Result<void> download(T* dst, const T* src, Index n) {
    if (n == 0) return {};
    OSPREY_CHECK(activate());
    const auto what = [&] { return fmt::format("download of {} {}", n, elementName<T>()); };
    OSPREY_CHECK(settle(what()));
    OSPREY_CUDA_CHECK(cudaMemcpy(dst, src, bytesOf<T>(n), cudaMemcpyDeviceToHost), what());
    return {};
  }
  template <class T>
  Result<Scalar> readOne(const T* p) {
    static_assert(sizeof(T) <= sizeof(Staging::bytes));
    OSPREY_CHECK(activate());
    std::lock_guard lock(m_stagingLock);
    const std::string what = fmt::format("read-back of one {}", elementName<T>(1));
    OSPREY_CUDA_CHECK(cudaMemcpyAsync(m_staging->bytes, p, sizeof(T), cudaMemcpyDeviceToHost, m_stream), what);
    OSPREY_CHECK(settle(what));
    T value;
    std::memcpy(&value, m_staging->bytes, sizeof(T));
    return static_cast<Scalar>(value);
  }

 private:
  // A raw block of n elements of `size` bytes each (see allocate).
  Result<void*> allocateBytes(Index n, std::size_t size, std::string_view elements) {
    if (n == 0) return static_cast<void*>(nullptr);
    if (n < 0 || n > std::numeric_limits<Index>::max() / static_cast<Index>(size))
      return Error{fmt::format("{}: cannot allocate {} {}: the byte count overflows", m_name, n, elements)};
    const std::size_t requested = static_cast<std::size_t>(n) * size;
    const std::size_t bytes = sizeClass(requested);  // cached blocks are reused by size class
    OSPREY_CHECK(activate());
    {
      std::lock_guard lock(m_cacheLock);
      auto cached = m_idle.find(bytes);
      if (cached != m_idle.end() && !cached->second.empty()) {
        void* p = cached->second.back();
        cached->second.pop_back();
        m_cachedBytes -= bytes;
        noteLive(p, bytes);
        return p;
      }
    }
    void* p = nullptr;
    cudaError_t status = cudaMalloc(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it before trying again
      OSPREY_CHECK(releaseCache());
      status = cudaMalloc(&p, bytes);
    }
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      std::size_t freeBytes = 0, totalBytes = 0;
      OSPREY_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes), "reading free memory after an out-of-memory");
      return Error{fmt::format("{}: out of memory allocating {} bytes ({} {}; {:.1f} GiB) with {:.1f} "
                               "GiB free of {:.1f} GiB — release buffers or use smaller sizes",
                               m_name, requested, n, elements, gib(requested), gib(freeBytes), gib(totalBytes))};
    }
    OSPREY_CUDA_CHECK(status, fmt::format("cudaMalloc of {} bytes", bytes));
    std::lock_guard lock(m_cacheLock);
    noteLive(p, bytes);
    return p;
  }
  // m_cacheLock held.
  void noteLive(void* p, std::size_t bytes) {
    m_live[p] = bytes;
    m_liveBytes += bytes;
    if (m_liveBytes > m_peakLiveBytes) m_peakLiveBytes = m_liveBytes;
  }
  template <class T>
  static std::string_view elementName(Index n = 2) {
    if constexpr (std::is_same_v<T, double>) return n == 1 ? "double" : "doubles";
    else if constexpr (std::is_same_v<T, float>) return n == 1 ? "float" : "floats";
    else return n == 1 ? "element" : "elements";
  }

 public:

  // body(i) for i in [0, n), one GPU thread per index (grid-stride). A strict fault in any thread
  // is recorded in the fault slot; the first one becomes the error of the next check.
  template <class Body>
  Result<void> forEach(Index n, const Body& body) {
    if (n == 0) return {};
    OSPREY_CHECK(activate());
    const unsigned long long launch =
        OSPREY_TRY(beginLaunch(&cuda_detail::thisUnit, &cuda_detail::thisUnitAddresses,
                               &cuda_detail::forEachLabel<Body>, n));
    cuda_detail::forEachKernel<<<cuda_detail::blocksFor(n, m_multiprocessors), cuda_detail::kThreadsPerBlock, 0, m_stream>>>(
        n, body, launch);
    OSPREY_CUDA_CHECK(cudaGetLastError(), cuda_detail::forEachLabel<Body>() + " launch");
    if (m_checkEachLaunch) return settle("the launch");
    return {};
  }

  template <class T, class C>
  Result<Scalar> fold(ViewOf<T> v, Scalar seed, C combine) {
    OSPREY_CHECK(activate());
    const unsigned long long launch =
        OSPREY_TRY(beginLaunch(&cuda_detail::thisUnit, &cuda_detail::thisUnitAddresses,
                               &cuda_detail::foldLabel<C>, v.n));
    std::lock_guard lock(m_stagingLock);
    Scalar* result = &m_scratch->value;
    cuda_detail::foldKernel<<<1, cuda_detail::kFoldThreads, 0, m_stream>>>(v, seed, combine, result, launch);
    OSPREY_CUDA_CHECK(cudaGetLastError(), cuda_detail::foldLabel<C>() + " launch");
    OSPREY_CUDA_CHECK(cudaMemcpyAsync(&m_staging->value, result, sizeof(Scalar), cudaMemcpyDeviceToHost, m_stream),
                      cuda_detail::foldLabel<C>() + " result");
    OSPREY_CHECK(settle(fmt::format("the result of a fold over {} elements", v.n)));
    return m_staging->value;
  }

  // out[r] = finish(r, fold of term(r, 0 .. length(r))) for r in [0, rows): see rowFoldKernel. The
  // fold starts from `seed`, or from term(r, 0) when `fromFirst` and the row is not empty. With
  // Tree (a Regroupable combine only: the fast handler's row sums and maxima) the row is folded as
  // a tree across the block instead (treeRowFoldKernel), which groups the combines differently.
  template <bool Tree = false, class Out, class L, class T, class C, class F>
  Result<void> foldRows(Out* out, Index rows, L length, Scalar seed, bool fromFirst, T term, C combine,
                        F finish) {
    static_assert(!Tree || Regroupable<C>, "a row fold is regrouped only for a Regroupable combine");
    if (rows == 0) return {};
    OSPREY_CHECK(activate());
    const cuda_detail::LabelFunction label = Tree ? &cuda_detail::treeFoldLabel<T> : &cuda_detail::rowFoldLabel<T>;
    const unsigned long long launch =
        OSPREY_TRY(beginLaunch(&cuda_detail::thisUnit, &cuda_detail::thisUnitAddresses, label, rows));
    const Index filling = static_cast<Index>(m_multiprocessors) *
                          (Tree ? cuda_detail::kTreeFoldBlocksPerProcessor : cuda_detail::kRowFoldBlocksPerProcessor);
    const auto blocks = static_cast<unsigned>(rows < filling ? rows : filling);
    if constexpr (Tree) {
      cuda_detail::treeRowFoldKernel<<<blocks, cuda_detail::kTreeFoldThreads, 0, m_stream>>>(out, rows, length, seed, fromFirst,
                                                                               term, combine, finish, launch);
    } else if (rows >= cuda_detail::kLaneFoldRowsPerProcessor * static_cast<Index>(m_multiprocessors)) {
      const Index groups = (rows + cuda_detail::kLaneFoldThreads - 1) / cuda_detail::kLaneFoldThreads;
      const Index most = static_cast<Index>(m_multiprocessors) * cuda_detail::kLaneFoldBlocksPerProcessor;
      cuda_detail::laneRowFoldKernel<<<static_cast<unsigned>(groups < most ? groups : most),
                                       cuda_detail::kLaneFoldThreads, 0, m_stream>>>(out, rows, length, seed, fromFirst,
                                                                                     term, combine, finish, launch);
    } else {
      cuda_detail::rowFoldKernel<<<blocks, cuda_detail::kRowFoldThreads, 0, m_stream>>>(out, rows, length, seed, fromFirst, term,
                                                                          combine, finish, launch);
    }
    OSPREY_CUDA_CHECK(cudaGetLastError(), label() + " launch");
    if (m_checkEachLaunch) return settle("the launch");
    return {};
  }

  // out (blocks, rows, cols) = the blocks of src that `layout` describes (the handler has checked
  // that they lie inside src): see copyBlocksKernel.
  template <class T>
  Result<void> copyBlocks(T* out, ViewOf<T> src, const BlockLayout& layout, Index blocks, Index rows, Index cols) {
    if (blocks == 0 || rows == 0 || cols == 0) return {};
    OSPREY_CHECK(activate());
    const Index tiles =
        blocks * ((rows + cuda_detail::kCopyTile - 1) / cuda_detail::kCopyTile) *
        ((cols + cuda_detail::kCopyTile - 1) / cuda_detail::kCopyTile);
    const Index most = static_cast<Index>(m_multiprocessors) * cuda_detail::kCopyBlocksPerProcessor;
    const bool alongRows = layout.rowStride == 1 && layout.colStride != 1;
    cuda_detail::copyBlocksKernel<<<static_cast<unsigned>(tiles < most ? tiles : most), cuda_detail::kCopyThreads, 0,
                                    m_stream>>>(out, src.data, layout, blocks, rows, cols, alongRows);
    OSPREY_CUDA_CHECK(cudaGetLastError(), fmt::format("copyBlocks ({} blocks of {} x {}) launch", blocks, rows, cols));
    if (m_checkEachLaunch) return settle("copyBlocks");
    return {};
  }

  // Each thread finds the first hit among its indices; the smallest wins (atomicMin).
  template <class T>
  Result<Index> indexOf(ViewOf<T> v, Scalar x) {
    if (v.n == 0) return Index{0};
    OSPREY_CHECK(activate());
    std::lock_guard lock(m_stagingLock);
    m_staging->index = v.n;  // "not found"
    long long* best = &m_scratch->index;
    OSPREY_CUDA_CHECK(cudaMemcpyAsync(best, &m_staging->index, sizeof(long long), cudaMemcpyHostToDevice, m_stream),
                      "indexOf setup");
    cuda_detail::indexOfKernel<<<cuda_detail::blocksFor(v.n, m_multiprocessors), cuda_detail::kThreadsPerBlock, 0, m_stream>>>(
        v, x, best);
    OSPREY_CUDA_CHECK(cudaGetLastError(), "indexOf launch");
    OSPREY_CUDA_CHECK(cudaMemcpyAsync(&m_staging->index, best, sizeof(long long), cudaMemcpyDeviceToHost, m_stream),
                      "indexOf result");
    OSPREY_CHECK(settle(fmt::format("the result of indexOf over {} elements", v.n)));
    return static_cast<Index>(m_staging->index);
  }

  Result<void> matMul(Scalar* out, View a, View b, Index rows, Index inner, Index cols) {
    OSPREY_CHECK(activate());
    const auto label = [&] { return fmt::format("matMul ({} x {}) * ({} x {})", rows, inner, inner, cols); };
    OSPREY_CUDA_CHECK(launchExactMatMul(out, a.data, b.data, rows, inner, cols, m_multiprocessors, m_stream),
                      label() + " launch");
    if (m_checkEachLaunch) return settle(label());
    return {};
  }

  // `batch` exact products of one shape, one after another in a, b and out (see
  // launchExactMatMulBatched): attention's per-head products in one launch instead of one each.
  Result<void> matMulBatched(Scalar* out, View a, View b, Index batch, Index rows, Index inner, Index cols) {
    OSPREY_CHECK(activate());
    const auto label = [&] {
      return fmt::format("matMul of {} products ({} x {}) * ({} x {})", batch, rows, inner, inner, cols);
    };
    OSPREY_CUDA_CHECK(launchExactMatMulBatched(out, a.data, b.data, batch, rows, inner, cols, m_multiprocessors, m_stream),
                      label() + " launch");
    if (m_checkEachLaunch) return settle(label());
    return {};
  }

  // What the cache holds, for tests and diagnostics.
  std::size_t cachedBytes() const {
    std::lock_guard lock(m_cacheLock);
    return m_cachedBytes;
  }
  // The most bytes handed out at once since the device was opened (or since resetPeak()): the
  // peak memory a run's buffers needed, whatever the cache held besides.
  std::size_t peakLiveBytes() const {
    std::lock_guard lock(m_cacheLock);
    return m_peakLiveBytes;
  }
  void resetPeak() {
    std::lock_guard lock(m_cacheLock);
    m_peakLiveBytes = m_liveBytes;
  }
  int multiprocessors() const { return m_multiprocessors; }
  // The most shared memory a block may ask for (bytes, opting in beyond the default 48 KiB).
  std::size_t sharedMemoryPerBlock() const { return m_sharedMemoryPerBlock; }
  // How many launches that can fault have been queued so far (each has a number 1, 2, ...).
  unsigned long long launches() const {
    std::lock_guard lock(m_launchLock);
    return m_launchCount;
  }

  // Called by the launch helpers: registers the launching unit's fault slot with this device on
  // the unit's first launch, records the kernel's label in the ring, and returns the launch's
  // number (which the kernel stamps next to a fault it records).
  Result<unsigned long long> beginLaunch(const void* unit, Result<cuda_detail::UnitAddresses> (*addresses)(),
                                         cuda_detail::LabelFunction label, Index n) {
    std::lock_guard lock(m_launchLock);
    bool known = false;
    for (const Unit& u : m_units) known = known || u.key == unit;
    if (!known) {
      const cuda_detail::UnitAddresses at = OSPREY_TRY(addresses());
      void* readback = nullptr;
      OSPREY_CUDA_CHECK(cudaMallocHost(&readback, sizeof(cuda_detail::SlotReadback)),
                        "allocating pinned memory for a fault slot");
      m_units.push_back(Unit{unit, at, static_cast<cuda_detail::SlotReadback*>(readback)});
    }
    const unsigned long long number = ++m_launchCount;
    m_launchRecords[number % kLaunchRecords] = LaunchRecord{number, label, n};
    return number;
  }

  ~CudaDevice() {
    // At process exit the CUDA runtime may already be shutting down; waiting and freeing are best
    // effort and their status is deliberately ignored (the driver reclaims everything with the
    // process).
    (void)cudaDeviceSynchronize();
    for (auto& [bytes, blocks] : m_idle)
      for (void* p : blocks) (void)cudaFree(p);
    for (const Unit& u : m_units) (void)cudaFreeHost(u.readback);
    (void)cudaFree(m_scratch);
    (void)cudaFreeHost(m_staging);
  }
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

 private:
  // Host-side read-back values (pinned) and their device-side counterparts.
  struct Staging {
    Scalar value;
    long long index;
    alignas(8) unsigned char bytes[8];  // one element of any storage type, read back
  };
  struct Unit {
    const void* key;  // the unit's `thisUnit`
    cuda_detail::UnitAddresses device;
    cuda_detail::SlotReadback* readback;  // pinned
  };
  struct LaunchRecord {
    unsigned long long number = 0;
    cuda_detail::LabelFunction label = nullptr;
    Index n = 0;
  };
  static constexpr unsigned long long kLaunchRecords = 8192;

  CudaDevice(int index, const cudaDeviceProp& properties, Staging* staging)
      : m_index(index),
        m_multiprocessors(properties.multiProcessorCount),
        m_sharedMemoryPerBlock(properties.sharedMemPerBlockOptin),
        m_name(std::string("cuda: ") + properties.name),
        m_checkEachLaunch(checkEachLaunchFromEnvironment()),
        m_staging(staging),
        m_launchRecords(kLaunchRecords) {
    void* scratch = nullptr;
    if (cudaMalloc(&scratch, sizeof(Staging)) != cudaSuccess) (void)cudaGetLastError();
    m_scratch = static_cast<Staging*>(scratch);
  }

  // OSPREY_CUDA_DEVICE, or 0.
  static Result<int> requestedIndex() {
    const char* env = std::getenv("OSPREY_CUDA_DEVICE");
    if (!env || !*env) return 0;
    char* end = nullptr;
    const long index = std::strtol(env, &end, 10);
    if (*end != '\0' || index < 0 || index > 1024)
      return Error{fmt::format("OSPREY_CUDA_DEVICE=`{}` is not a device number (0, 1, ...)", env)};
    return static_cast<int>(index);
  }
  static bool checkEachLaunchFromEnvironment() {
    const char* env = std::getenv("OSPREY_CUDA_CHECK_EACH_LAUNCH");
    return env && *env && std::string(env) != "0";
  }

  // Work runs on this device, whichever host thread asks (the current device is per thread).
  Result<void> activate() const {
    OSPREY_CUDA_CHECK(cudaSetDevice(m_index));
    if (!m_scratch) return Error{fmt::format("{}: no device memory for read-back scratch", m_name)};
    return {};
  }

  // Waits for the stream and returns the first fault recorded since the last check, if any,
  // naming its kernel; then clears every slot, so the device is usable again. `what` is the
  // operation that needed the wait. Copies the caller queued to pinned memory are complete after.
  Result<void> settle(std::string_view what) {
    std::lock_guard lock(m_launchLock);
    for (const Unit& u : m_units)
      OSPREY_CUDA_CHECK(cudaMemcpyAsync(&u.readback->fault, u.device.fault, sizeof(DeviceFault),
                                        cudaMemcpyDeviceToHost, m_stream),
                        fmt::format("reading a fault slot before {}", what));
    const cudaError_t ran = cudaStreamSynchronize(m_stream);
    if (ran != cudaSuccess)
      return cuda::failure(ran, "cudaStreamSynchronize(stream)", __FILE__, __LINE__,
                           fmt::format("waiting for the queued kernels before {} (the last launched: {})", what,
                                       describeLaunch(m_launchCount)));
    bool faulted = false;
    for (const Unit& u : m_units) faulted = faulted || u.readback->fault.kind != static_cast<int>(FaultKind::None);
    if (!faulted) return {};

    // Which launch faulted first: the smallest stamp among the faulting units.
    const Unit* first = nullptr;
    unsigned long long firstLaunch = 0;
    for (const Unit& u : m_units) {
      if (u.readback->fault.kind == static_cast<int>(FaultKind::None)) continue;
      OSPREY_CUDA_CHECK(cudaMemcpy(&u.readback->launch, u.device.launch, sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost),
                        "reading a fault-launch stamp");
      if (!first || u.readback->launch < firstLaunch) {
        first = &u;
        firstLaunch = u.readback->launch;
      }
      OSPREY_CUDA_CHECK(cudaMemset(u.device.fault, 0, sizeof(DeviceFault)), "clearing a fault slot");
      OSPREY_CUDA_CHECK(cudaMemset(u.device.launch, 0, sizeof(unsigned long long)), "clearing a fault-launch stamp");
    }
    const DeviceFault& f = first->readback->fault;
    std::string words = describeFault(static_cast<FaultKind>(f.kind), f.a, f.b);
    if (m_checkEachLaunch) return Error{std::move(words)};  // the launching operation: the host's words
    return Error{fmt::format("{} (in {}; found at {})", words, describeLaunch(firstLaunch), what)};
  }

  // "forEach<…> over 10000 elements, launch 3 on this device" (m_launchLock held).
  std::string describeLaunch(unsigned long long number) const {
    if (number == 0) return "no kernel";
    const LaunchRecord& r = m_launchRecords[number % kLaunchRecords];
    if (r.number != number || !r.label)
      return fmt::format("launch {} on this device, older than the last {} whose names are kept", number,
                         kLaunchRecords);
    return fmt::format("{} over {} elements, launch {} on this device", r.label(), r.n, number);
  }

  Result<void> releaseCache() {
    // Queued kernels may still read released blocks: let them finish before the driver gets the
    // memory back.
    OSPREY_CUDA_CHECK(cudaDeviceSynchronize(), "waiting for queued kernels before giving cached memory back");
    std::map<std::size_t, std::vector<void*>> idle;
    {
      std::lock_guard lock(m_cacheLock);
      idle.swap(m_idle);
      m_cachedBytes = 0;
    }
    for (auto& [bytes, blocks] : idle)
      for (void* p : blocks) OSPREY_CUDA_CHECK(cudaFree(p), "giving cached memory back");
    return {};
  }

  template <class T>
  static std::size_t bytesOf(Index n) { return static_cast<std::size_t>(n) * sizeof(T); }
  static double gib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

  int m_index;
  int m_multiprocessors;
  std::size_t m_sharedMemoryPerBlock;
  std::string m_name;
  bool m_checkEachLaunch;
  mutable std::mutex m_cacheLock;
  std::map<const void*, std::size_t> m_live;            // handed out: pointer -> bytes
  std::map<std::size_t, std::vector<void*>> m_idle;     // released: bytes -> blocks
  std::size_t m_cachedBytes = 0;
  std::size_t m_liveBytes = 0, m_peakLiveBytes = 0;
  bool m_holding = false;                               // see holdReleases
  std::vector<const void*> m_held;
  cudaStream_t m_stream = nullptr;                      // see stream()

  std::mutex m_stagingLock;        // one read-back at a time through m_staging / m_scratch
  Staging* m_staging;              // pinned host memory
  Staging* m_scratch = nullptr;    // device memory: a fold's result, indexOf's best index

  mutable std::mutex m_launchLock;  // m_units, m_launchRecords, m_launchCount
  std::vector<Unit> m_units;
  std::vector<LaunchRecord> m_launchRecords;  // ring: launch number % kLaunchRecords
  unsigned long long m_launchCount = 0;
};

// A run's result, unless work it queued faulted after its last read-back: launches are queued
// without waiting, so a run on this device ends with one wait, whose fault replaces its result.
template <class R>
R afterFlush(CudaDevice& device, R result) {
  if (result.ok())
    if (auto pending = device.flush(); !pending.ok()) return R(pending.error());
  return result;
}

}  // namespace osprey
