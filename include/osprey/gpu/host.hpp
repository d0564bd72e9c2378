// The `host` device runtime: GPU-surface kernels run in parallel on every CPU core (OpenMP).
//
// Parallelism is over independent outputs only: each element of build is computed by exactly
// the kernel call lists would make; fold stays a sequential left fold; matMul splits rows and
// columns across threads and SIMD lanes but never one output's k loop. Bit-identical to lists.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <string>

#include <fmt/format.h>
#include <omp.h>

#include "osprey/config.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#include "osprey/view.hpp"

namespace osprey {

// The blocked, vectorised exact product (src/gpu/host_matmul.cpp).
void hostMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner, Index cols);

class HostDevice {
 public:
  static Result<std::shared_ptr<HostDevice>> open() {
    static std::shared_ptr<HostDevice> device(new HostDevice());
    return device;
  }

  std::string name() const { return "host"; }

  Result<Scalar*> allocate(Index n) {
    if (n == 0) return static_cast<Scalar*>(nullptr);
    auto* p = static_cast<Scalar*>(::operator new(static_cast<std::size_t>(n) * sizeof(Scalar),
                                                  std::align_val_t{64}, std::nothrow));
    if (!p) return Error{fmt::format("host: out of memory allocating {} bytes", n * 8)};
    return p;
  }
  void release(Scalar* p) {
    if (p) ::operator delete(p, std::align_val_t{64});
  }

  Result<void> upload(Scalar* dst, const Scalar* src, Index n) {
    for (Index i = 0; i < n; ++i) dst[i] = src[i];
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

 private:
  HostDevice() = default;
  static constexpr Index kParallelThreshold = 4096;

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

}  // namespace osprey
