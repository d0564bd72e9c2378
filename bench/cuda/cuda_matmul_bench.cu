// The cuda device's exact matMul: TFLOP/s, checked bit-identical to the host device before any
// timing, and set against fp64 ceilings measured on the same GPU in the same run.
//
//   FLOPs of one product = 2 * rows * inner * cols (one multiply and one add per k per output)
//
// Ceilings (each measured here, none taken from a datasheet):
//   * cuBLAS DGEMM on 8192^3: the GPU's fp64 matrix rate. It uses the tensor cores' fused fp64
//     multiply-add and its own summation order, so it is not bit-identical to anything; it is
//     the yardstick for "how fast can fp64 matrix products go on this GPU".
//   * fp64 FMA probe: independent chains of fused multiply-adds (2 FLOPs per instruction): the
//     vector units' peak.
//   * non-fused probe: independent chains of __dmul_rn then __dadd_rn, the instruction mix the
//     exact contract allows (a separate rounding after the multiply): the most an exact product
//     can reach, about half the FMA peak.
//
// Products with one or a few rows or columns (one-token decoding: weightᵀ times a column, and its
// mirror 1 x 768 x 50257) are memory-bound, 2 FLOPs per 8 bytes of the large operand, so their
// yardstick is bandwidth: GB/s = (rows*inner + inner*cols + rows*cols) * 8 bytes / time, against
// a device-to-device copy measured here (bytes read + bytes written).
//
// Launch overhead: the time to queue one small kernel (a 768-element build) when launches do not
// wait for each other (the cuda device's default), measured over 2000 launches and a final flush.
//
// Output: a readable table, then one `RESULT|name|result|number` line per check or figure for
// scripts/gpu-check.sh. Exit status 1 if any product differs from the host by even one bit.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "osprey/gpu/cuda.hpp"
#include "osprey/gpu/host.hpp"
#include "osprey/gpu/surface.hpp"

namespace osprey::bench {
namespace {

// A failure that ends the benchmark: printed, and the exit status is non-zero.
struct Failed {
  std::string message;
};

template <class T>
T need(Result<T> r) {
  if (!r.ok()) throw Failed{r.error().message};
  return std::move(r).value();
}
void need(Result<void> r) {
  if (!r.ok()) throw Failed{r.error().message};
}

// Turns a raw CUDA status into the checked-call macro's Error.
Result<void> checked(cudaError_t status, const char* what) {
  OSPREY_CUDA_CHECK(status, what);
  return {};
}

void needBlas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Failed{fmt::format("cuBLAS: {} failed: {} ({})", what, cublasGetStatusName(status), cublasGetStatusString(status))};
}

// Deterministic values with a wide dynamic range (splitmix64), so a different summation order or
// a fused multiply-add would change bits.
std::vector<Scalar> matrixValues(Index n, std::uint64_t seed) {
  std::vector<Scalar> out(static_cast<std::size_t>(n));
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < out.size(); ++i) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    Scalar x = static_cast<Scalar>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    if (i % 3 == 0) x = x * 1e8;
    out[i] = x;
  }
  return out;
}

struct Shape {
  Index rows, inner, cols;
  double flops() const { return 2.0 * static_cast<double>(rows) * static_cast<double>(inner) * static_cast<double>(cols); }
  // The fewest bytes a product moves: each operand read once, the output written once.
  double bytes() const {
    return 8.0 * (static_cast<double>(rows) * static_cast<double>(inner) + static_cast<double>(inner) * static_cast<double>(cols) +
                  static_cast<double>(rows) * static_cast<double>(cols));
  }
  bool memoryBound() const { return rows <= 8 || cols <= 8; }
  std::string name() const { return fmt::format("{}x{}x{}", rows, inner, cols); }
};

// Timing with CUDA events: `warmups` untimed runs, then the median of `repeats` timed ones (ms).
template <class Launch>
double medianMilliseconds(Launch launch, int warmups, int repeats) {
  cudaEvent_t start{}, stop{};
  need(checked(cudaEventCreate(&start), "cudaEventCreate"));
  need(checked(cudaEventCreate(&stop), "cudaEventCreate"));
  for (int i = 0; i < warmups; ++i) launch();
  need(checked(cudaDeviceSynchronize(), "warm-up"));
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    need(checked(cudaEventRecord(start), "cudaEventRecord"));
    launch();
    need(checked(cudaEventRecord(stop), "cudaEventRecord"));
    need(checked(cudaEventSynchronize(stop), "timed run"));
    float ms = 0.0f;
    need(checked(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime"));
    times.push_back(ms);
  }
  need(checked(cudaEventDestroy(start), "cudaEventDestroy"));
  need(checked(cudaEventDestroy(stop), "cudaEventDestroy"));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct MatMulFigure {
  Shape shape;
  std::string check;  // how bit identity was checked
  bool identical = false;
  double ms = 0.0, tflops = 0.0, gbps = 0.0;
};

// Checks one shape against the host device (every row when the host can do it quickly, else a
// spread of rows, each the host's full k-ordered sum), then times the kernel alone.
MatMulFigure measureMatMul(const std::shared_ptr<CudaDevice>& dev, Shape s, std::uint64_t seed) {
  MatMulFigure figure{s};
  const auto a = matrixValues(s.rows * s.inner, seed);
  const auto b = matrixValues(s.inner * s.cols, seed + 1);
  auto da = need(toGpu(dev, std::span<const Scalar>(a)));
  auto db = need(toGpu(dev, std::span<const Scalar>(b)));
  auto product = need(gpuMatMul(da, db, s.rows, s.inner, s.cols));  // the public path, synchronised
  const auto actual = need(fromGpu(product));

  std::vector<Index> rows;
  if (s.flops() <= 8e9) {
    for (Index r = 0; r < s.rows; ++r) rows.push_back(r);
    figure.check = "every row";
  } else {
    for (Index r : {Index{0}, Index{1}, s.rows / 3, s.rows / 2 + 1, s.rows - 2, s.rows - 1}) rows.push_back(r);
    for (Index r = 127; r < s.rows; r += 509) rows.push_back(r);
    figure.check = fmt::format("{} rows", rows.size());
  }
  figure.identical = true;
  std::vector<Scalar> expected(static_cast<std::size_t>(s.cols));
  if (rows.size() == static_cast<std::size_t>(s.rows)) {
    std::vector<Scalar> all(static_cast<std::size_t>(s.rows * s.cols));
    hostMatMul(all.data(), a.data(), b.data(), s.rows, s.inner, s.cols);
    figure.identical = std::memcmp(all.data(), actual.data(), all.size() * sizeof(Scalar)) == 0;
  } else {
    for (Index r : rows) {
      hostMatMul(expected.data(), a.data() + r * s.inner, b.data(), 1, s.inner, s.cols);
      if (std::memcmp(expected.data(), actual.data() + r * s.cols, expected.size() * sizeof(Scalar)) != 0)
        figure.identical = false;
    }
  }
  if (!figure.identical) return figure;  // never time a wrong answer

  Scalar* out = product.data();
  auto launch = [&] {
    need(checked(launchExactMatMul(out, da.data(), db.data(), s.rows, s.inner, s.cols, dev->multiprocessors()),
                 "exact matMul launch"));
  };
  const double once = medianMilliseconds(launch, 1, 1);
  const int repeats = std::clamp(static_cast<int>(300.0 / std::max(once, 1e-3)), 5, 50);
  figure.ms = medianMilliseconds(launch, 2, repeats);
  figure.tflops = s.flops() / (figure.ms * 1e-3) / 1e12;
  figure.gbps = s.bytes() / (figure.ms * 1e-3) / 1e9;
  return figure;
}

// A device-to-device copy of 2 GiB: GB/s counting bytes read plus bytes written.
double copyGbps(const std::shared_ptr<CudaDevice>& dev) {
  const Index n = Index{1} << 28;
  auto from = need(gpuAllocate(dev, n));
  auto to = need(gpuAllocate(dev, n));
  need(checked(cudaMemset(from.data(), 1, static_cast<std::size_t>(n) * sizeof(Scalar)), "cudaMemset"));
  auto launch = [&] {
    need(checked(cudaMemcpyAsync(to.data(), from.data(), static_cast<std::size_t>(n) * sizeof(Scalar),
                                 cudaMemcpyDeviceToDevice),
                 "device copy"));
  };
  const double ms = medianMilliseconds(launch, 2, 7);
  return 2.0 * 8.0 * static_cast<double>(n) / (ms * 1e-3) / 1e9;
}

// Element i = x[i] + 1: one small kernel.
Result<GpuBuffer<CudaDevice>> addOne(const GpuBuffer<CudaDevice>& x) {
  return gpuMap(x, [=] OSPREY_FN(Scalar v) -> Scalar { return v + 1.0; });
}

// Microseconds per queued small launch (a 768-element map, each reading the one before), the
// whole chain flushed at the end; and the same with every launch checked as it completes.
std::pair<double, double> launchMicroseconds(const std::shared_ptr<CudaDevice>& dev) {
  constexpr int kLaunches = 2000;
  const std::vector<Scalar> start(768, 0.0);
  auto chain = [&](bool each) {
    const bool before = dev->checksEachLaunch();
    dev->setCheckEachLaunch(each);
    auto x = need(toGpu(dev, std::span<const Scalar>(start)));
    need(dev->flush());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) x = need(addOne(x));
    need(dev->flush());
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    dev->setCheckEachLaunch(before);
    if (need(fromGpu(x))[767] != static_cast<Scalar>(kLaunches)) throw Failed{"the launch chain computed a wrong value"};
    return us / kLaunches;
  };
  chain(false);  // warm-up
  return {chain(false), chain(true)};
}

// The same chain of 768-element "+1" kernels launched raw, with no handler in between: the
// floor that the handler's per-launch work (allocation, fault numbering, checks) adds to.
__global__ void rawAddOne(double* x, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = x[i] + 1.0;
}
double rawLaunchMicroseconds(const std::shared_ptr<CudaDevice>& dev) {
  constexpr int kLaunches = 2000;
  const std::vector<Scalar> zeros(768, 0.0);
  auto x = need(toGpu(dev, std::span<const Scalar>(zeros)));
  auto chain = [&] {
    need(dev->flush());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) rawAddOne<<<3, 256>>>(x.data(), 768);
    if (cudaDeviceSynchronize() != cudaSuccess) throw Failed{"the raw launch chain failed"};
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kLaunches;
  };
  chain();  // warm-up
  const double us = chain();
  if (need(fromGpu(x))[767] != static_cast<Scalar>(2 * kLaunches)) throw Failed{"the raw launch chain computed a wrong value"};
  return us;
}

// cuBLAS DGEMM, n x n x n, on the same device: TFLOP/s.
double cublasTflops(const std::shared_ptr<CudaDevice>& dev, Index n) {
  const auto values = matrixValues(n * n, 7);
  auto a = need(toGpu(dev, std::span<const Scalar>(values)));
  auto b = need(toGpu(dev, std::span<const Scalar>(values)));
  auto c = need(gpuAllocate(dev, n * n));
  cublasHandle_t blas{};
  needBlas(cublasCreate(&blas), "cublasCreate");
  const double one = 1.0, zero = 0.0;
  const int m = static_cast<int>(n);
  auto launch = [&] {
    needBlas(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.data(), m, b.data(), m, &zero, c.data(), m),
             "cublasDgemm");
  };
  const double ms = medianMilliseconds(launch, 2, 7);
  needBlas(cublasDestroy(blas), "cublasDestroy");
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

// Independent fp64 chains per thread; Fused: x = fma(x, m, c), else x = (x * m) + c rounded twice.
template <bool Fused>
__global__ void fp64Probe(double* sink, int iterations, double m, double c) {
  constexpr int kChains = 8;
  double x[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) x[j] = threadIdx.x * 1e-3 + j;
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int j = 0; j < kChains; ++j) x[j] = Fused ? __fma_rn(x[j], m, c) : __dadd_rn(__dmul_rn(x[j], m), c);
  }
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < kChains; ++j) sum += x[j];
  if (sum == -1.0) *sink = sum;  // never true; keeps the chains alive
}

template <bool Fused>
double probeTflops(const std::shared_ptr<CudaDevice>& dev) {
  constexpr int kThreads = 256, kChains = 8, kIterations = 1 << 14;
  const int blocks = dev->multiprocessors() * 8;
  auto sink = need(gpuAllocate(dev, 1));
  auto launch = [&] {
    fp64Probe<Fused><<<blocks, kThreads>>>(sink.data(), kIterations, 0.999999, 1e-6);
    need(checked(cudaGetLastError(), Fused ? "fp64Probe<fused> launch" : "fp64Probe<non-fused> launch"));
  };
  const double ms = medianMilliseconds(launch, 1, 5);
  const double flops = 2.0 * kChains * kIterations * static_cast<double>(blocks) * kThreads;
  return flops / (ms * 1e-3) / 1e12;
}

int run() {
  auto dev = need(CudaDevice::open());
  fmt::print("exact matMul on {} ({} multiprocessors)\n\n", dev->name(), dev->multiprocessors());

  const Shape shapes[] = {{768, 768, 768},   {1024, 768, 2304}, {4096, 768, 3072}, {4096, 4096, 4096},
                          {1, 768, 50257},   {50257, 768, 1},   {2304, 768, 1},    {768, 3072, 1},
                          {3072, 768, 5}};
  std::vector<MatMulFigure> figures;
  std::uint64_t seed = 11;
  for (Shape s : shapes) figures.push_back(measureMatMul(dev, s, seed += 2));

  const double blas = cublasTflops(dev, 8192);
  const double fma = probeTflops<true>(dev);
  const double nonFused = probeTflops<false>(dev);
  const double copy = copyGbps(dev);
  const auto [queuedUs, eachUs] = launchMicroseconds(dev);
  const double rawUs = rawLaunchMicroseconds(dev);

  fmt::print("{:<18} {:<14} {:>10} {:>9} {:>11} {:>12} {:>9} {:>8}\n", "shape", "host bits", "ms", "TFLOP/s", "% cuBLAS",
             "% non-fused", "GB/s", "% copy");
  bool allIdentical = true;
  for (const auto& f : figures) {
    allIdentical = allIdentical && f.identical;
    fmt::print("{:<18} {:<14} {:>10.3f} {:>9.2f} {:>10.1f}% {:>11.1f}% {:>9.0f} {:>7.1f}%\n", f.shape.name(),
               f.identical ? "same (" + f.check + ")" : "DIFFER", f.ms, f.tflops, 100.0 * f.tflops / blas,
               100.0 * f.tflops / nonFused, f.gbps, 100.0 * f.gbps / copy);
  }
  fmt::print("\nceilings on this GPU: cuBLAS DGEMM 8192^3 {:.2f} TFLOP/s; fp64 FMA probe {:.2f}; "
             "non-fused mul+add probe {:.2f}\n\n",
             blas, fma, nonFused);
  fmt::print("device-to-device copy {:.0f} GB/s (read + write); a small launch costs {:.2f} us queued, {:.2f} us "
             "when every launch is checked\n\n",
             copy, queuedUs, eachUs);

  for (const auto& f : figures)
    fmt::print("RESULT|matMul {} bit-identical to host ({})|{}|\n", f.shape.name(), f.check, f.identical ? "PASS" : "FAIL");
  for (const auto& f : figures)
    if (f.identical) fmt::print("RESULT|matMul {} TFLOP/s|{:.1f}% of cuBLAS|{:.2f}\n", f.shape.name(), 100.0 * f.tflops / blas, f.tflops);
  for (const auto& f : figures)
    if (f.identical && f.shape.memoryBound())
      fmt::print("RESULT|matMul {} GB/s|{:.1f}% of copy|{:.0f}\n", f.shape.name(), 100.0 * f.gbps / copy, f.gbps);
  fmt::print("RESULT|device-to-device copy GB/s|ceiling for memory-bound|{:.0f}\n", copy);
  fmt::print("RESULT|small launch queued (us)|deferred checks|{:.2f}\n", queuedUs);
  fmt::print("RESULT|small launch raw (us)|no handler: the floor|{:.2f}\n", rawUs);
  fmt::print("RESULT|small launch checked (us)|each launch waited for|{:.2f}\n", eachUs);
  fmt::print("RESULT|fp64 cuBLAS DGEMM 8192^3 TFLOP/s|peak|{:.2f}\n", blas);
  fmt::print("RESULT|fp64 FMA probe TFLOP/s|peak|{:.2f}\n", fma);
  fmt::print("RESULT|fp64 non-fused mul+add probe TFLOP/s|ceiling for exact|{:.2f}\n", nonFused);
  return allIdentical ? 0 : 1;
}

}  // namespace
}  // namespace osprey::bench

int main() {
  try {
    return osprey::bench::run();
  } catch (const osprey::bench::Failed& failed) {
    std::fprintf(stderr, "osprey_cuda_bench: %s\n", failed.message.c_str());
    std::printf("RESULT|cuda matMul benchmark|FAIL|\n");
    return 1;
  }
}
