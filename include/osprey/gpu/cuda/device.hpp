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
// can fault gets a number (1, 2, ...), and the host keeps the labels of the last 8192 launches in
// a ring (launch_ledger.hpp). The kernel takes its number as an argument, and each thread, before it
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
// The kernels live in kernels/ (one file a kind), the fault slot's launch stamp and kernel labels in
// launch_faults.hpp, the exact product's launchers in exact_matmul.hpp.
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
#include "osprey/gpu/block_cache.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/gpu/size_class.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/exact_matmul.hpp"
#include "osprey/gpu/cuda/kernel_clock.hpp"
#include "osprey/gpu/cuda/kernels/copy_blocks.hpp"
#include "osprey/gpu/cuda/kernels/elementwise.hpp"
#include "osprey/gpu/cuda/kernels/fold.hpp"
#include "osprey/gpu/cuda/kernels/row_folds.hpp"
#include "osprey/gpu/cuda/launch_faults.hpp"
#include "osprey/gpu/cuda/launch_ledger.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#include "osprey/transposed.hpp"
#include "osprey/view.hpp"

namespace osprey {

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
  // Whether the kernel clock times each launch (OSPREY_CUDA_KERNEL_TIMES): a CUDA graph's replays
  // would not repeat its events, so a handler that records steps steps instead.
  bool timesKernels() const { return m_clock.on(); }
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
    if (p) (void)m_cache.release(p);  // the cache has no limit here: a block is cached, or held
  }

  // While held, released blocks stay live instead of going back to the cache: a CUDA graph replays
  // its recording's kernels onto the very blocks they used, including blocks whose buffers were
  // released during the recording, so no other buffer may be handed those blocks until the graph
  // is gone. Ending the hold releases them.
  void holdReleases(bool hold) {
    for (const void* p : m_cache.hold(hold)) release(p);
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
    if (const auto cached = m_cache.take(bytes)) return *cached;
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
    m_cache.add(p, bytes);
    return p;
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
    const auto timed = m_clock.time(m_stream, [&] { return m_clock.named(&cuda_detail::forEachSites<Body>); });
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
    {
      const auto timed = m_clock.time(m_stream, [&] { return m_clock.named(&cuda_detail::foldSites<C>); });
      cuda_detail::foldKernel<<<1, cuda_detail::kFoldThreads, 0, m_stream>>>(v, seed, combine, result, launch);
      OSPREY_CUDA_CHECK(cudaGetLastError(), cuda_detail::foldLabel<C>() + " launch");
    }
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
    const bool warps = !Tree && rows >= cuda_detail::kWarpFoldMinRows;
    const auto timed = m_clock.time(m_stream, [&] {
      return m_clock.named(Tree ? &cuda_detail::treeFoldSites<T> : &cuda_detail::rowFoldSites<T>) + (warps ? " (warps)" : "");
    });
    if constexpr (Tree) {
      cuda_detail::treeRowFoldKernel<<<blocks, cuda_detail::kTreeFoldThreads, 0, m_stream>>>(out, rows, length, seed, fromFirst,
                                                                               term, combine, finish, launch);
    } else if (warps) {
      const Index needed = (rows + cuda_detail::kWarpFoldWarps - 1) / cuda_detail::kWarpFoldWarps;
      const Index most = static_cast<Index>(m_multiprocessors) * cuda_detail::kWarpFoldBlocksPerProcessor;
      cuda_detail::warpRowFoldKernel<<<static_cast<unsigned>(needed < most ? needed : most),
                                       cuda_detail::kWarpFoldWarps * 32, 0, m_stream>>>(out, rows, length, seed, fromFirst,
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
    const auto timed = m_clock.time(m_stream, [&] { return std::string(alongRows ? "copyBlocks (transposing)" : "copyBlocks"); });
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
    const auto timed = m_clock.time(m_stream, [] { return std::string("indexOf"); });
    cuda_detail::indexOfKernel<<<cuda_detail::blocksFor(v.n, m_multiprocessors), cuda_detail::kThreadsPerBlock, 0, m_stream>>>(
        v, x, best);
    OSPREY_CUDA_CHECK(cudaGetLastError(), "indexOf launch");
    OSPREY_CUDA_CHECK(cudaMemcpyAsync(&m_staging->index, best, sizeof(long long), cudaMemcpyDeviceToHost, m_stream),
                      "indexOf result");
    OSPREY_CHECK(settle(fmt::format("the result of indexOf over {} elements", v.n)));
    return static_cast<Index>(m_staging->index);
  }

  // A kernel of a handler's own (a derived operation's), queued as this device's launches are: on
  // its stream, timed by the kernel clock under `label`, waited for and checked in the checked
  // mode. `launch(stream)` queues it and returns the launch's status.
  template <class Launch>
  Result<void> launchOwn(const std::string& label, Launch launch) {
    OSPREY_CHECK(activate());
    const auto timed = m_clock.time(m_stream, [&] { return label; });
    OSPREY_CUDA_CHECK(launch(m_stream), label + " launch");
    if (m_checkEachLaunch) return settle(label);
    return {};
  }

  Result<void> matMul(Scalar* out, View a, View b, Index rows, Index inner, Index cols) {
    OSPREY_CHECK(activate());
    const auto label = [&] { return fmt::format("matMul ({} x {}) * ({} x {})", rows, inner, inner, cols); };
    const auto timed = m_clock.time(m_stream, label);
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
    const auto timed = m_clock.time(m_stream, label);
    OSPREY_CUDA_CHECK(launchExactMatMulBatched(out, a.data, b.data, batch, rows, inner, cols, m_multiprocessors, m_stream),
                      label() + " launch");
    if (m_checkEachLaunch) return settle(label());
    return {};
  }

  // The product with one operand held transposed (osprey/transposed.hpp; launchExactMatMulTransposed):
  // the same bits as the copy-then-multiply reference, without the copies where cuBLASLt reads the
  // held layout. Copies it still makes live in blocks of this device's cache, given back once queued.
  Result<void> matMulTransposed(Scalar* out, View a, View b, Index rows, Index inner, Index cols, Transposed layout) {
    OSPREY_CHECK(activate());
    const auto label = [&] {
      return fmt::format("matMul ({} x {}){} * ({} x {}){}", rows, inner, layout == Transposed::A ? " held as aT" : "",
                         inner, cols, layout == Transposed::B ? " held as bT" : "");
    };
    const auto timed = m_clock.time(m_stream, label);
    std::string scratchError;
    const ExactScratch scratch{[&](Index n) -> double* {
                                 auto p = allocate(n);
                                 if (p.ok()) return *p;
                                 scratchError = p.error().message;
                                 return nullptr;
                               },
                               [this](double* p) { release(p); }};
    const cudaError_t status =
        launchExactMatMulTransposed(out, a.data, b.data, rows, inner, cols, layout, m_multiprocessors, m_stream, scratch);
    if (!scratchError.empty()) return Error{fmt::format("{}: {}", label(), scratchError)};
    OSPREY_CUDA_CHECK(status, label() + " launch");
    if (m_checkEachLaunch) return settle(label());
    return {};
  }

  // What the cache holds, for tests and diagnostics.
  std::size_t cachedBytes() const { return m_cache.cachedBytes(); }
  // The most bytes handed out at once since the device was opened (or since resetPeak()): the
  // peak memory a run's buffers needed, whatever the cache held besides.
  std::size_t peakLiveBytes() const { return m_cache.peakLiveBytes(); }
  void resetPeak() { m_cache.resetPeak(); }
  int multiprocessors() const { return m_multiprocessors; }
  // The most shared memory a block may ask for (bytes, opting in beyond the default 48 KiB).
  std::size_t sharedMemoryPerBlock() const { return m_sharedMemoryPerBlock; }
  // How many launches that can fault have been queued so far (each has a number 1, 2, ...).
  unsigned long long launches() const { return m_ledger.launches(); }

  // Called by the launch helpers: the launch's number, its unit's fault slot registered and its
  // label kept (cuda_detail::LaunchLedger::begin).
  Result<unsigned long long> beginLaunch(const void* unit, Result<cuda_detail::UnitAddresses> (*addresses)(),
                                         cuda_detail::LabelFunction label, Index n) {
    return m_ledger.begin(unit, addresses, label, n);
  }

  ~CudaDevice() {
    // At process exit the CUDA runtime may already be shutting down; waiting and freeing are best
    // effort and their status is deliberately ignored (the driver reclaims everything with the
    // process).
    (void)cudaDeviceSynchronize();
    m_clock.report();
    for (auto& [bytes, blocks] : m_cache.drain())
      for (void* p : blocks) (void)cudaFree(p);
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

  CudaDevice(int index, const cudaDeviceProp& properties, Staging* staging)
      : m_index(index),
        m_multiprocessors(properties.multiProcessorCount),
        m_sharedMemoryPerBlock(properties.sharedMemPerBlockOptin),
        m_name(std::string("cuda: ") + properties.name),
        m_checkEachLaunch(checkEachLaunchFromEnvironment()),
        m_staging(staging) {
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
  Result<void> settle(std::string_view what) { return m_ledger.settle(m_stream, what, m_checkEachLaunch); }

  Result<void> releaseCache() {
    // Queued kernels may still read released blocks: let them finish before the driver gets the
    // memory back.
    OSPREY_CUDA_CHECK(cudaDeviceSynchronize(), "waiting for queued kernels before giving cached memory back");
    for (auto& [bytes, blocks] : m_cache.drain())
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
  BlockCache m_cache;                                    // see allocate and holdReleases
  cudaStream_t m_stream = nullptr;                      // see stream()
  cuda_detail::KernelClock m_clock;                     // OSPREY_CUDA_KERNEL_TIMES (kernel_clock.hpp)

  std::mutex m_stagingLock;        // one read-back at a time through m_staging / m_scratch
  Staging* m_staging;              // pinned host memory
  Staging* m_scratch = nullptr;    // device memory: a fold's result, indexOf's best index

  cuda_detail::LaunchLedger m_ledger;  // every launch's number and label, every unit's fault slot
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
