// The `host` device runtime: GPU-surface kernels run in parallel on every CPU core (OpenMP).
//
// Parallelism is over independent outputs only: each element of build is computed by exactly
// the kernel call lists would make; fold stays a sequential left fold; matMul splits rows and
// columns across threads and SIMD lanes but never one output's k loop, a chain of fused
// multiply-adds as lists' std::fma chain. Bit-identical to lists.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <omp.h>
#include <sys/mman.h>

#include "osprey/config.hpp"
#include "osprey/gpu/block_cache.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/gpu/device_runtime.hpp"
#include "osprey/gpu/size_class.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#include "osprey/transposed.hpp"
#include "osprey/view.hpp"

namespace osprey {

// The blocked, vectorised exact product (src/gpu/host/matmul.cpp), on the best kernel this CPU has;
// `layout` names an operand held transposed (osprey/transposed.hpp), read as it lies.
void hostMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner, Index cols,
                Transposed layout = Transposed::None);

// The product's kernels by instruction set, so that tests can check each one this CPU can run
// against the others (every one gives the same doubles).
enum class HostMatMulIsa { Avx512, Avx2, Portable };
// Whether this CPU can run `isa`'s kernel (AVX2's needs the FMA extension too).
bool hostMatMulIsaAvailable(HostMatMulIsa isa);
// hostMatMul on the kernel of `isa`, which must be available.
void hostMatMulWith(HostMatMulIsa isa, Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                    Index cols, Transposed layout = Transposed::None);

class HostDevice {
 public:
  static Result<std::shared_ptr<HostDevice>> open() {
    static std::shared_ptr<HostDevice> device(new HostDevice());
    return device;
  }

  ~HostDevice() { releaseCache(); }
  static std::size_t defaultCacheLimit() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
    const std::size_t half = pages > 0 && pageSize > 0
                                 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(pageSize) / 2
                                 : std::size_t{4096} << 20;
    return std::min(half, std::size_t{16384} << 20);
  }

  HostDevice(const HostDevice&) = delete;
  HostDevice& operator=(const HostDevice&) = delete;

  std::string name() const { return "host"; }

  // Host memory, from a cache of released blocks keyed by exact byte size, mirroring the cuda
  // runtime. Fresh pages cost a page fault each; a training step frees and re-asks for the same
  // sizes every step, so reusing blocks halves the time of the memory-bound layers. The cache
  // holds at most OSPREY_HOST_CACHE_MB MiB (default: half the machine's memory, at most 16 GiB);
  // beyond that, blocks go back at once. A 124M training step frees its old weights, moments
  // and gradients together (4 GB); a smaller cache sent them back to the system every step and
  // paid the page faults again (about 7% of the step on a 2-core machine).
  Result<Scalar*> allocate(Index n) {
    if (n == 0) return static_cast<Scalar*>(nullptr);
    const std::size_t requested = static_cast<std::size_t>(n) * sizeof(Scalar);
    const std::size_t bytes = sizeClass(requested);  // cached blocks are reused by size class
    if (const auto cached = m_cache.take(bytes)) return static_cast<Scalar*>(*cached);
    auto* p = fresh(bytes);
    if (!p) {
      releaseCache();
      p = fresh(bytes);
    }
    if (!p) return Error{fmt::format("host: out of memory allocating {} bytes", requested)};
    m_cache.add(p, bytes);
    return p;
  }
  void release(Scalar* p) {
    if (!p) return;
    const auto [what, bytes] = m_cache.release(p);
    if (what == BlockCache::Released::GiveBack) ::operator delete(p, alignmentFor(bytes));
  }
  // Gives every cached block back to the system.
  void releaseCache() {
    for (auto& [bytes, blocks] : m_cache.drain())
      for (void* p : blocks) ::operator delete(p, alignmentFor(bytes));
  }

  Result<void> upload(Scalar* dst, const Scalar* src, Index n) {
    std::copy_n(src, n, dst);
    return {};
  }
  Result<void> download(Scalar* dst, const Scalar* src, Index n) { return upload(dst, src, n); }
  Result<Scalar> readOne(const Scalar* p) { return *p; }

  // body(i) for i in [0, n), split into one contiguous range per thread. A strict fault in any
  // thread stops that thread's range and becomes the operation's error.
  template <class Body>
  Result<void> forEach(Index n, const Body& body) {
    std::exception_ptr failure;
    const bool parallel = n >= kParallelThreshold;
#pragma omp parallel if (parallel)
    {
      const Index threads = omp_get_num_threads(), t = omp_get_thread_num();
      const Index lo = n * t / threads, hi = n * (t + 1) / threads;
      try {
        for (Index i = lo; i < hi; ++i) body(i);
      } catch (...) {
#pragma omp critical(osprey_host_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) return errorOf(failure);
    return {};
  }

  template <class C>
  Result<Scalar> fold(View v, Scalar seed, C combine) {
    try {
      Scalar acc = seed;
      for (Index i = 0; i < v.n; ++i) acc = combine(acc, v[i]);
      return acc;
    } catch (...) {
      return errorOf(std::current_exception());
    }
  }

  // Each thread finds the first hit in its range; the smallest wins.
  Result<Index> indexOf(View v, Scalar x) {
    Index best = v.n;
#pragma omp parallel if (v.n >= kParallelThreshold) reduction(min : best)
    {
      const Index threads = omp_get_num_threads(), t = omp_get_thread_num();
      const Index lo = v.n * t / threads, hi = v.n * (t + 1) / threads;
      for (Index i = lo; i < hi; ++i)
        if (v[i] == x) {
          best = i;
          break;
        }
    }
    return best;
  }

  Result<void> matMul(Scalar* out, View a, View b, Index rows, Index inner, Index cols) {
    hostMatMul(out, a.data, b.data, rows, inner, cols);
    return {};
  }
  // The same product with one operand held transposed, read where it lies while it is packed: the
  // layers then skip their transposing copies (gpt2/layers/matmul.hpp), with the same bits.
  Result<void> matMulTransposed(Scalar* out, View a, View b, Index rows, Index inner, Index cols, Transposed layout) {
    hostMatMul(out, a.data, b.data, rows, inner, cols, layout);
    return {};
  }

 private:
  // Blocks of 2 MiB and more start on a 2 MiB boundary and ask for transparent huge pages: the
  // first touch of a fresh block then faults once per 2 MiB instead of once per 4 KiB page. A 124M
  // training step's first pass touches about 5 GB of new weights, moments and gradients; at 4 KiB
  // a fault that was most of the first step's extra time (bench/peers/README-llmc.md).
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static std::align_val_t alignmentFor(std::size_t bytes) {
    return std::align_val_t{bytes >= kHugePage ? kHugePage : std::size_t{64}};
  }
  static Scalar* fresh(std::size_t bytes) {
    void* p = ::operator new(bytes, alignmentFor(bytes), std::nothrow);
#if defined(MADV_HUGEPAGE)
    // Advice only: where the kernel has no transparent huge pages the block keeps 4 KiB pages.
    if (p && bytes >= kHugePage) (void)::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
    return static_cast<Scalar*>(p);
  }

  HostDevice() {
    const char* env = std::getenv("OSPREY_HOST_CACHE_MB");
    if (env && *env) m_cache.setLimit(std::strtoull(env, nullptr, 10) << 20);
  }
  // Below this many elements a kernel runs on the calling thread: starting and joining the team
  // costs more than the work (attention's per-head gathers are 4096 elements each, a few thousand
  // of them per training step).
  static constexpr Index kParallelThreshold = 16384;

  BlockCache m_cache{defaultCacheLimit()};

  static Error errorOf(std::exception_ptr failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      return Error{e.what()};
    } catch (...) {
      return Error{"host: unknown failure inside a kernel"};
    }
  }
};

OSPREY_ASSERT_DEVICE(HostDevice, "host");

}  // namespace osprey
