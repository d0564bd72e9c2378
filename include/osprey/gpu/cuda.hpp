// The `cuda` device runtime: GPU-surface kernels run on an NVIDIA GPU (compiled by nvcc only).
//
// Mirrors host.hpp member for member (open, name, allocate/release, upload/download/readOne,
// forEach, fold, indexOf, matMul), so the two can be diffed. The kernels are the model's own
// kernels, compiled for the device from the same source: forEach launches body(i) over a grid.
//
// Contract, as on the host (DESIGN.md §4): parallelism over independent outputs only. fold stays
// a sequential left fold in element order; matMul (src/gpu/cuda_matmul.cu) tiles rows and columns
// across blocks and threads but accumulates each output in k order from 0.0, with no fused
// multiply-add. The results are bit-identical to lists and gpu/host.
//
// Failures are Errors, never a quiet run elsewhere: open() without a GPU says so (no fallback to
// the host), every CUDA call goes through OSPREY_CUDA_CHECK, every launch is checked and then
// synchronised so an error names the kernel that caused it, and a `strictly` fault recorded inside
// a kernel (strict.hpp's device fault slot) becomes the launching operation's Error, in exactly
// the words the host gives ("integer overflow: 9223372036854775807 * 2").
//
// Why the launch helpers below sit in an unnamed namespace: strict.hpp's fault slot is a `static
// __device__` variable, one per translation unit (nvcc compiles each .cu as a whole program), and
// a kernel writes the slot of the module it was compiled into. If the kernel templates had
// external linkage, two .cu files instantiating forEachKernel<SameBody> would have their host
// stubs merged by the linker, and the launch could run one unit's kernel while reading the other
// unit's slot, losing the fault. With internal linkage every unit launches its own kernels and
// reads its own slot; whichever unit's copy of a CudaDevice member template the linker keeps, it
// calls that same unit's helpers, so kernel and slot always match.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda.hpp is compiled by nvcc only (a .cu file); host code reaches the cuda device through under()"
#endif

#include <cuda_runtime.h>
#include <cxxabi.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "osprey/config.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/gpu/cuda_check.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#include "osprey/view.hpp"

namespace osprey {

// The exact product (src/gpu/cuda_matmul.cu): out (rows x cols) = a (rows x inner) * b (inner x
// cols), row-major, on the current device's default stream. Returns the launch status
// (cudaGetLastError after the launches); the caller synchronises.
cudaError_t launchExactMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                              Index cols, int multiprocessors);

namespace cuda_detail {
namespace {  // internal linkage: see the header comment

constexpr int kThreadsPerBlock = 256;

// body(i) for every i in [0, n): a grid-stride loop, so any n fits any grid.
template <class Body>
__global__ void __launch_bounds__(kThreadsPerBlock) forEachKernel(Index n, Body body) {
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
}

// The left fold, on one thread. combine is arbitrary (not associative, not commutative: GPT-2's
// own combines are plain sums, but float addition is not associative), so the contract fixes the
// order: combine(...combine(seed, v[0])..., v[n-1]). Splitting it across threads would change the
// bits; one thread keeping the order is the only exact choice.
template <class C>
__global__ void foldKernel(View v, Scalar seed, C combine, Scalar* out) {
#if OSPREY_DEVICE_PASS
  static_assert(std::is_trivially_copyable_v<C>,
                "a combine closure must be trivially copyable: capture Views and scalars by value, "
                "never owning handles (vectors, strings, buffers)");
#endif
  Scalar acc = seed;
  for (Index i = 0; i < v.n; ++i) acc = combine(acc, v.data[i]);
  *out = acc;
}

// Every thread walks its grid-stride indices in ascending order and stops at its first hit; the
// smallest hit over all threads wins through atomicMin. *best starts at n ("not found").
__global__ void __launch_bounds__(kThreadsPerBlock) indexOfKernel(View v, Scalar x, long long* best) {
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < v.n; i += stride) {
    if (v.data[i] == x) {
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

// The fault a kernel of this unit recorded, if any, as the launching operation's Error; the slot
// is cleared again so the next launch starts clean (every launch here reads it, so it is clear
// before each launch). The copy also waits for the kernel to finish, so an error raised while it
// ran is reported here, with the kernel's name. `label()` names the kernel; it is called only on
// failure (demangling costs microseconds, and launches are on the hot path).
template <class Label>
Result<void> takeDeviceFault(const Label& label) {
  DeviceFault recorded{};
  OSPREY_CUDA_CHECK(cudaMemcpyFromSymbol(&recorded, osprey_device_fault, sizeof recorded), label() + " run");
  if (recorded.kind == static_cast<int>(FaultKind::None)) return {};
  const DeviceFault clear{};
  OSPREY_CUDA_CHECK(cudaMemcpyToSymbol(osprey_device_fault, &clear, sizeof clear), label() + " fault reset");
  return Error{describeFault(static_cast<FaultKind>(recorded.kind), recorded.a, recorded.b)};
}

// Blocks for a grid-stride launch over n elements: enough to fill the GPU, never more than n needs.
inline unsigned blocksFor(Index n, int multiprocessors) {
  const Index needed = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const Index filling = static_cast<Index>(multiprocessors) * 32;
  return static_cast<unsigned>(needed < filling ? needed : filling);
}

template <class Body>
Result<void> launchForEach(Index n, const Body& body, int multiprocessors) {
  if (n == 0) return {};
  const auto label = [] { return kernelLabel<Body>("forEach"); };
  forEachKernel<<<blocksFor(n, multiprocessors), kThreadsPerBlock>>>(n, body);
  OSPREY_CUDA_CHECK(cudaGetLastError(), label() + " launch");
  return takeDeviceFault(label);
}

template <class C>
Result<Scalar> launchFold(View v, Scalar seed, const C& combine, Scalar* scratch) {
  const auto label = [] { return kernelLabel<C>("fold"); };
  foldKernel<<<1, 1>>>(v, seed, combine, scratch);
  OSPREY_CUDA_CHECK(cudaGetLastError(), label() + " launch");
  OSPREY_CHECK(takeDeviceFault(label));
  Scalar result = 0.0;
  OSPREY_CUDA_CHECK(cudaMemcpy(&result, scratch, sizeof result, cudaMemcpyDeviceToHost), label() + " result");
  return result;
}

inline Result<Index> launchIndexOf(View v, Scalar x, long long* best, int multiprocessors) {
  const long long notFound = v.n;
  OSPREY_CUDA_CHECK(cudaMemcpy(best, &notFound, sizeof notFound, cudaMemcpyHostToDevice), "indexOf setup");
  indexOfKernel<<<blocksFor(v.n, multiprocessors), kThreadsPerBlock>>>(v, x, best);
  OSPREY_CUDA_CHECK(cudaGetLastError(), "indexOf launch");
  long long found = 0;
  OSPREY_CUDA_CHECK(cudaMemcpy(&found, best, sizeof found, cudaMemcpyDeviceToHost), "indexOf result");
  return static_cast<Index>(found);
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
      device.reset(new CudaDevice(index, properties));
    }
    return device;
  }

  std::string name() const { return m_name; }

  // Device memory, from a cache of released blocks keyed by exact byte size (cudaMalloc and
  // cudaFree cost tens of microseconds, and cudaFree synchronises the whole device; the model
  // allocates the same few sizes over and over). Every operation synchronises before it returns,
  // so a released block is idle and can be handed out again at once. When cudaMalloc runs out of
  // memory, the cache is given back and the allocation tried once more.
  Result<Scalar*> allocate(Index n) {
    if (n == 0) return static_cast<Scalar*>(nullptr);
    if (n < 0 || n > std::numeric_limits<Index>::max() / static_cast<Index>(sizeof(Scalar)))
      return Error{fmt::format("{}: cannot allocate {} doubles: the byte count overflows", m_name, n)};
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(Scalar);
    OSPREY_CHECK(activate());
    {
      std::lock_guard lock(m_cacheLock);
      auto cached = m_idle.find(bytes);
      if (cached != m_idle.end() && !cached->second.empty()) {
        Scalar* p = cached->second.back();
        cached->second.pop_back();
        m_cachedBytes -= bytes;
        m_live[p] = bytes;
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
      return Error{fmt::format("{}: out of memory allocating {} bytes ({} doubles; {:.1f} GiB) with {:.1f} "
                               "GiB free of {:.1f} GiB — release buffers or use smaller sizes",
                               m_name, bytes, n, gib(bytes), gib(freeBytes), gib(totalBytes))};
    }
    OSPREY_CUDA_CHECK(status, fmt::format("cudaMalloc of {} bytes", bytes));
    std::lock_guard lock(m_cacheLock);
    m_live[static_cast<Scalar*>(p)] = bytes;
    return static_cast<Scalar*>(p);
  }
  void release(Scalar* p) {
    if (!p) return;
    std::lock_guard lock(m_cacheLock);
    auto live = m_live.find(p);
    if (live == m_live.end()) return;  // not ours; never happens through GpuBuffer
    m_idle[live->second].push_back(p);
    m_cachedBytes += live->second;
    m_live.erase(live);
  }

  Result<void> upload(Scalar* dst, const Scalar* src, Index n) {
    if (n == 0) return {};
    OSPREY_CHECK(activate());
    OSPREY_CUDA_CHECK(cudaMemcpy(dst, src, bytesOf(n), cudaMemcpyHostToDevice),
                      fmt::format("upload of {} doubles", n));
    return {};
  }
  Result<void> download(Scalar* dst, const Scalar* src, Index n) {
    if (n == 0) return {};
    OSPREY_CHECK(activate());
    OSPREY_CUDA_CHECK(cudaMemcpy(dst, src, bytesOf(n), cudaMemcpyDeviceToHost),
                      fmt::format("download of {} doubles", n));
    return {};
  }
  Result<Scalar> readOne(const Scalar* p) {
    Scalar value = 0.0;
    OSPREY_CHECK(download(&value, p, 1));
    return value;
  }

  // body(i) for i in [0, n), one GPU thread per index (grid-stride). A strict fault in any thread
  // is recorded in the fault slot; the first one becomes the operation's error.
  template <class Body>
  Result<void> forEach(Index n, const Body& body) {
    OSPREY_CHECK(activate());
    return cuda_detail::launchForEach(n, body, m_multiprocessors);
  }

  template <class C>
  Result<Scalar> fold(View v, Scalar seed, C combine) {
    OSPREY_CHECK(activate());
    Scalar* scratch = OSPREY_TRY(allocate(1));
    auto result = cuda_detail::launchFold(v, seed, combine, scratch);
    release(scratch);
    return result;
  }

  // Each thread finds the first hit among its indices; the smallest wins (atomicMin).
  Result<Index> indexOf(View v, Scalar x) {
    if (v.n == 0) return Index{0};
    OSPREY_CHECK(activate());
    static_assert(sizeof(long long) == sizeof(Scalar), "the scratch slot holds one long long");
    Scalar* scratch = OSPREY_TRY(allocate(1));
    auto result = cuda_detail::launchIndexOf(v, x, reinterpret_cast<long long*>(scratch), m_multiprocessors);
    release(scratch);
    return result;
  }

  Result<void> matMul(Scalar* out, View a, View b, Index rows, Index inner, Index cols) {
    OSPREY_CHECK(activate());
    const auto label = [&] { return fmt::format("matMul ({} x {}) * ({} x {})", rows, inner, inner, cols); };
    OSPREY_CUDA_CHECK(launchExactMatMul(out, a.data, b.data, rows, inner, cols, m_multiprocessors),
                      label() + " launch");
    OSPREY_CUDA_CHECK(cudaDeviceSynchronize(), label() + " run");
    return {};
  }

  // What the cache holds, for tests and diagnostics.
  std::size_t cachedBytes() const {
    std::lock_guard lock(m_cacheLock);
    return m_cachedBytes;
  }
  int multiprocessors() const { return m_multiprocessors; }

  ~CudaDevice() {
    // At process exit the CUDA runtime may already be shutting down; freeing is best effort and
    // its status is deliberately ignored (the driver reclaims everything with the process).
    for (auto& [bytes, blocks] : m_idle)
      for (Scalar* p : blocks) (void)cudaFree(p);
  }
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

 private:
  CudaDevice(int index, const cudaDeviceProp& properties)
      : m_index(index),
        m_multiprocessors(properties.multiProcessorCount),
        m_name(std::string("cuda: ") + properties.name) {}

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

  // Work runs on this device, whichever host thread asks (the current device is per thread).
  Result<void> activate() const {
    OSPREY_CUDA_CHECK(cudaSetDevice(m_index));
    return {};
  }

  Result<void> releaseCache() {
    std::map<std::size_t, std::vector<Scalar*>> idle;
    {
      std::lock_guard lock(m_cacheLock);
      idle.swap(m_idle);
      m_cachedBytes = 0;
    }
    for (auto& [bytes, blocks] : idle)
      for (Scalar* p : blocks) OSPREY_CUDA_CHECK(cudaFree(p), "giving cached memory back");
    return {};
  }

  static std::size_t bytesOf(Index n) { return static_cast<std::size_t>(n) * sizeof(Scalar); }
  static double gib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

  int m_index;
  int m_multiprocessors;
  std::string m_name;
  mutable std::mutex m_cacheLock;
  std::map<Scalar*, std::size_t> m_live;                  // handed out: pointer -> bytes
  std::map<std::size_t, std::vector<Scalar*>> m_idle;     // released: bytes -> blocks
  std::size_t m_cachedBytes = 0;
};

}  // namespace osprey
