// The cuda device's exact matMul: TFLOP/s beside cuBLAS DGEMM on the same shapes in the same run,
// each product first checked bit for bit against the contract's fma chain computed on the host.
//
//   FLOPs of one product = 2 * rows * inner * cols (one fused multiply-add per k per output)
//
// Every product shape of GPT-2 124M's training step at B4 T1024 (the linear layers forward and
// backward, the lm head, attention's 48 heads batched), one sequence's qkv product, and the
// decoding shapes. For each tensor-core shape the exact product runs under the device's choice
// of tiling and under each tiling by name (ExactTiling), so a run shows whether the choice was the
// fastest; cuBLAS DGEMM (cublasDgemmStridedBatched for the batches) runs the same shape as the
// yardstick. DGEMM is not bit-identical to anything in general (it may split k: docs/EXACTNESS.md); it is how fast fp64 products go on this GPU.
//
// Ceilings measured here: cuBLAS DGEMM on 8192^3 (the fp64 tensor-core rate) and an fp64 FMA
// probe (independent chains of fused multiply-adds on the vector units: the rate the few-rows and
// few-columns kernels' chains run at).
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
// scripts/gpu-check.sh. Exit status 1 if any product differs from the fma chain by even one bit.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/cuda/exact_lt.hpp"
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

using Buffer = GpuBuffer<CudaDevice>;

// ---- operands and the host's chains -----------------------------------------------------------------

OSPREY_FN inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Element i of operand `seed`: ±[1, 2) · 2^(-30 .. 30), built from bits so that the device builds
// the operand in place and the host recomputes any line of it exactly. The wide range makes any
// other order of the terms, or a product rounded before its addition, change bits.
OSPREY_FN inline Scalar operandValue(std::uint64_t seed, Index i) {
  const std::uint64_t h = mix64(mix64(seed) ^ static_cast<std::uint64_t>(i));
  const std::uint64_t bits = ((h >> 63) << 63) | (static_cast<std::uint64_t>(1023 - 30 + ((h >> 52) & 0x7ff) % 61) << 52) |
                             (h & ((std::uint64_t{1} << 52) - 1));
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  return std::bit_cast<Scalar>(bits);
#endif
}

// Values as GPT-2's products meet them: activations of spread about 1 (a LayerNorm's output) and
// weights of spread 0.02 (GPT-2's initialisation). Each is the centred sum of four uniforms on
// [0, 1) times `scale`: additions and multiplications only, so host and device give the same bits.
// Timed beside the wide operands to show whether a product's speed depends on its values.
OSPREY_FN inline Scalar modelValue(std::uint64_t seed, Index i, Scalar scale) {
  std::uint64_t h = mix64(mix64(seed) ^ static_cast<std::uint64_t>(i));
  Scalar sum = 0.0;
  for (int u = 0; u < 4; ++u) {
    sum = sum + static_cast<Scalar>(h >> 11) * 0x1p-53;
    h = mix64(h);
  }
  return (sum - 2.0) * scale;
}

// Which values a shape's operands hold: operandValue's wide ones, or modelValue's (a with spread 1,
// b with spread 0.02).
enum class Values { Wide, Model };

OSPREY_FN inline Scalar valueOf(Values values, std::uint64_t seed, Index i, bool weight) {
  return values == Values::Wide ? operandValue(seed, i) : modelValue(seed, i, weight ? 0.02 : 1.0);
}

Result<Buffer> deviceOperand(const std::shared_ptr<CudaDevice>& dev, Index n, std::uint64_t seed,
                             Values values = Values::Wide, bool weight = false) {
  return gpuBuild(dev, n, [=] OSPREY_FN(Index i) -> Scalar { return valueOf(values, seed, i, weight); });
}

// from[at[i]] for each i: the checked outputs, gathered on the device.
Result<Buffer> gatherOutputs(const Buffer& from, const Buffer& at) {
  const auto values = from.view(), where = at.view();
  return gpuBuild(from.device(), at.size(),
                  [=] OSPREY_FN(Index i) -> Scalar { return values[static_cast<Index>(where[i])]; });
}

struct Shape {
  Index batch, rows, inner, cols;
  Values values = Values::Wide;
  double flops() const {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(rows) * static_cast<double>(inner) *
           static_cast<double>(cols);
  }
  // The fewest bytes a product moves: each operand read once, the output written once.
  double bytes() const {
    return 8.0 * static_cast<double>(batch) *
           (static_cast<double>(rows) * static_cast<double>(inner) + static_cast<double>(inner) * static_cast<double>(cols) +
            static_cast<double>(rows) * static_cast<double>(cols));
  }
  bool memoryBound() const { return rows <= 8 || cols <= 8; }
  std::string name() const {
    const std::string of = values == Values::Model ? " (model values)" : "";
    return (batch == 1 ? fmt::format("{}x{}x{}", rows, inner, cols) : fmt::format("{}x({}x{}x{})", batch, rows, inner, cols)) +
           of;
  }
};

// The outputs checked: a grid of rows x columns (the first and last of each, the rest spread
// evenly) in the first and last product, sized to about kHostChains fused multiply-adds on the
// host, and the whole last row and last column where those fit too.
constexpr double kHostChains = 3e7;

struct Checked {
  std::vector<Index> at;
  std::vector<Scalar> value;
  std::string how;
};

std::vector<Index> spread(Index n, Index want) {
  std::vector<Index> lines;
  if (n == 0) return lines;
  if (want >= n) want = n;
  for (Index i = 0; i < want; ++i) lines.push_back(want == 1 ? 0 : i * (n - 1) / (want - 1));
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  return lines;
}

Checked expectedOutputs(Shape s, std::uint64_t seedA, std::uint64_t seedB) {
  const auto aRow = [&](Index z, Index r, std::vector<Scalar>& into) {
    into.resize(static_cast<std::size_t>(s.inner));
    for (Index k = 0; k < s.inner; ++k)
      into[static_cast<std::size_t>(k)] = valueOf(s.values, seedA, (z * s.rows + r) * s.inner + k, false);
  };
  const auto bColumn = [&](Index z, Index c, std::vector<Scalar>& into) {
    into.resize(static_cast<std::size_t>(s.inner));
    for (Index k = 0; k < s.inner; ++k)
      into[static_cast<std::size_t>(k)] = valueOf(s.values, seedB, (z * s.inner + k) * s.cols + c, true);
  };
  const auto chain = [&](const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
    Scalar acc = 0.0;
    for (Index k = 0; k < s.inner; ++k) acc = std::fma(a[static_cast<std::size_t>(k)], b[static_cast<std::size_t>(k)], acc);
    return acc;
  };
  std::vector<Index> products = {0, s.batch - 1};
  products.erase(std::unique(products.begin(), products.end()), products.end());
  const double depth = std::max<double>(1.0, static_cast<double>(s.inner));
  const double perProduct = kHostChains / static_cast<double>(products.size());
  const auto side = static_cast<Index>(std::clamp(std::sqrt(perProduct / depth), 4.0, 128.0));
  const bool edges = 4.0 * static_cast<double>(s.rows + s.cols) * depth <= perProduct;
  Checked c;
  for (Index z : products) {
    const auto rows = spread(s.rows, side), cols = spread(s.cols, side);
    std::vector<std::vector<Scalar>> aRows(rows.size()), bColumns(cols.size());
#pragma omp parallel for
    for (std::size_t i = 0; i < rows.size(); ++i) aRow(z, rows[i], aRows[i]);
#pragma omp parallel for
    for (std::size_t j = 0; j < cols.size(); ++j) bColumn(z, cols[j], bColumns[j]);
    std::vector<std::pair<Index, Index>> outputs;  // (row, column)
    for (Index r : rows)
      for (Index col : cols) outputs.push_back({r, col});
    if (edges) {
      for (Index col = 0; col < s.cols; ++col) outputs.push_back({s.rows - 1, col});
      for (Index r = 0; r < s.rows; ++r) outputs.push_back({r, s.cols - 1});
    }
    const std::size_t first = c.at.size();
    c.at.resize(first + outputs.size());
    c.value.resize(first + outputs.size());
#pragma omp parallel for schedule(dynamic, 64)
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      const auto [r, col] = outputs[o];
      const auto i = std::lower_bound(rows.begin(), rows.end(), r) - rows.begin();
      const auto j = std::lower_bound(cols.begin(), cols.end(), col) - cols.begin();
      std::vector<Scalar> a, b;
      const bool rowKept = static_cast<std::size_t>(i) < rows.size() && rows[static_cast<std::size_t>(i)] == r;
      const bool colKept = static_cast<std::size_t>(j) < cols.size() && cols[static_cast<std::size_t>(j)] == col;
      if (!rowKept) aRow(z, r, a);
      if (!colKept) bColumn(z, col, b);
      c.at[first + o] = (z * s.rows + r) * s.cols + col;
      c.value[first + o] = chain(rowKept ? aRows[static_cast<std::size_t>(i)] : a, colKept ? bColumns[static_cast<std::size_t>(j)] : b);
    }
  }
  c.how = fmt::format("{} outputs{}", c.at.size(), edges ? " incl. last row and column" : "");
  return c;
}

// ---- timing --------------------------------------------------------------------------------------

// CUDA events: `warmups` untimed runs, then the median of `repeats` timed ones (ms).
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

// About 150 ms of timed runs, at least 5 and at most 40.
template <class Launch>
double timedMilliseconds(Launch launch) {
  const double once = medianMilliseconds(launch, 1, 1);
  const int repeats = std::clamp(static_cast<int>(150.0 / std::max(once, 1e-3)), 5, 40);
  return medianMilliseconds(launch, 1, repeats);
}

constexpr ExactTiling kNamedTilings[] = {ExactTiling::Square128, ExactTiling::Wide128x144, ExactTiling::Middle128x96,
                                         ExactTiling::Small64, ExactTiling::Square128Deep};
const char* tilingName(ExactTiling t) {
  switch (t) {
    case ExactTiling::Chosen: return "chosen";
    case ExactTiling::Square128: return "128x128";
    case ExactTiling::Wide128x144: return "128x144";
    case ExactTiling::Middle128x96: return "128x96";
    case ExactTiling::Small64: return "64x64";
    case ExactTiling::Square128Deep: return "128x128/32k";
  }
  return "?";
}

struct MatMulFigure {
  Shape shape;
  std::string check;  // how bit identity was checked
  bool identical = false;
  double ms = 0.0, tflops = 0.0, gbps = 0.0;
  double blasTflops = 0.0;
  std::vector<std::pair<ExactTiling, double>> tilings;  // TFLOP/s under each named tiling
};

// Checks one shape against the fma chain (the product through the device's own matMul, as the
// model runs it), then times the exact launch alone, each named tiling, and cuBLAS.
MatMulFigure measureMatMul(const std::shared_ptr<CudaDevice>& dev, cublasHandle_t blas, Shape s, std::uint64_t seed) {
  MatMulFigure figure{s};
  const std::uint64_t seedA = 2 * seed + 1, seedB = 2 * seed + 2;
  auto a = need(deviceOperand(dev, s.batch * s.rows * s.inner, seedA, s.values, false));
  auto b = need(deviceOperand(dev, s.batch * s.inner * s.cols, seedB, s.values, true));
  auto product = need(gpuAllocate(dev, s.batch * s.rows * s.cols));
  if (s.batch == 1) {
    need(dev->matMul(product.data(), a.view(), b.view(), s.rows, s.inner, s.cols));
  } else {
    need(dev->matMulBatched(product.data(), a.view(), b.view(), s.batch, s.rows, s.inner, s.cols));
  }
  const Checked expected = expectedOutputs(s, seedA, seedB);
  const std::vector<Scalar> at(expected.at.begin(), expected.at.end());
  const auto where = need(toGpu(dev, std::span<const Scalar>(at)));
  const auto gather = [&] { return need(fromGpu(need(gatherOutputs(product, where)))); };
  const auto same = [&](const std::vector<Scalar>& actual) {
    for (std::size_t i = 0; i < actual.size(); ++i)
      if (std::bit_cast<std::uint64_t>(actual[i]) != std::bit_cast<std::uint64_t>(expected.value[i])) return false;
    return actual.size() == expected.value.size();
  };
  figure.check = expected.how;
  figure.identical = same(gather());
  if (!figure.identical) return figure;  // never time a wrong answer

  const auto exact = [&](ExactTiling tiling) {
    return [&, tiling] {
      need(checked(s.batch == 1 ? launchExactMatMul(product.data(), a.data(), b.data(), s.rows, s.inner, s.cols,
                                                    dev->multiprocessors(), dev->stream(), tiling)
                                : launchExactMatMulBatched(product.data(), a.data(), b.data(), s.batch, s.rows, s.inner,
                                                           s.cols, dev->multiprocessors(), dev->stream(), tiling),
                   "exact matMul launch"));
    };
  };
  figure.ms = timedMilliseconds(exact(ExactTiling::Chosen));
  figure.tflops = s.flops() / (figure.ms * 1e-3) / 1e12;
  figure.gbps = s.bytes() / (figure.ms * 1e-3) / 1e9;
  if (!s.memoryBound()) {
    for (ExactTiling tiling : kNamedTilings) {
      exact(tiling)();
      if (!same(gather())) {  // every tiling must give the chain's bits too
        figure.identical = false;
        figure.check += fmt::format(", {} tiles DIFFER", tilingName(tiling));
        return figure;
      }
      const double ms = timedMilliseconds(exact(tiling));
      figure.tilings.push_back({tiling, s.flops() / (ms * 1e-3) / 1e12});
    }
  }

  // cuBLAS is column-major: the row-major out = a·b is its outᵀ = bᵀ·aᵀ.
  const double one = 1.0, zero = 0.0;
  const int m = static_cast<int>(s.cols), n = static_cast<int>(s.rows), k = static_cast<int>(s.inner);
  const auto dgemm = [&] {
    if (s.batch == 1) {
      needBlas(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, b.data(), m, a.data(), std::max(k, 1), &zero,
                           product.data(), m),
               "cublasDgemm");
    } else {
      needBlas(cublasDgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, b.data(), m, s.inner * s.cols,
                                         a.data(), std::max(k, 1), s.rows * s.inner, &zero, product.data(), m,
                                         s.rows * s.cols, static_cast<int>(s.batch)),
               "cublasDgemmStridedBatched");
    }
  };
  figure.blasTflops = s.flops() / (timedMilliseconds(dgemm) * 1e-3) / 1e12;
  return figure;
}

// ---- ceilings ------------------------------------------------------------------------------------

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
Result<Buffer> addOne(const Buffer& x) {
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

// cuBLAS DGEMM, n x n x n: TFLOP/s.
double cublasTflops(const std::shared_ptr<CudaDevice>& dev, cublasHandle_t blas, Index n) {
  auto a = need(deviceOperand(dev, n * n, 7));
  auto c = need(gpuAllocate(dev, n * n));
  const double one = 1.0, zero = 0.0;
  const int m = static_cast<int>(n);
  auto launch = [&] {
    needBlas(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.data(), m, a.data(), m, &zero, c.data(), m),
             "cublasDgemm");
  };
  const double ms = medianMilliseconds(launch, 2, 7);
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

// Independent chains of x = fma(x, m, c) per thread: the vector units' fp64 peak.
__global__ void fp64FmaProbe(double* sink, int iterations, double m, double c) {
  constexpr int kChains = 8;
  double x[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) x[j] = threadIdx.x * 1e-3 + j;
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int j = 0; j < kChains; ++j) x[j] = __fma_rn(x[j], m, c);
  }
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < kChains; ++j) sum += x[j];
  if (sum == -1.0) *sink = sum;  // never true; keeps the chains alive
}

double fmaProbeTflops(const std::shared_ptr<CudaDevice>& dev) {
  constexpr int kThreads = 256, kChains = 8, kIterations = 1 << 14;
  const int blocks = dev->multiprocessors() * 8;
  auto sink = need(gpuAllocate(dev, 1));
  auto launch = [&] {
    fp64FmaProbe<<<blocks, kThreads>>>(sink.data(), kIterations, 0.999999, 1e-6);
    need(checked(cudaGetLastError(), "fp64FmaProbe launch"));
  };
  const double ms = medianMilliseconds(launch, 1, 5);
  const double flops = 2.0 * kChains * kIterations * static_cast<double>(blocks) * kThreads;
  return flops / (ms * 1e-3) / 1e12;
}

int run() {
  auto dev = need(CudaDevice::open());
  fmt::print("exact matMul on {} ({} multiprocessors)\n\n", dev->name(), dev->multiprocessors());
  cublasHandle_t blas{};
  needBlas(cublasCreate(&blas), "cublasCreate");
  needBlas(cublasSetStream(blas, dev->stream()), "cublasSetStream");

  constexpr Index N = 4096, C = 768, V = 50257;
  const Shape shapes[] = {
      // GPT-2 124M, B4 T1024: x·w, then w·doutᵀ (dx, transposed) and xᵀ·dout (dw) of each linear layer
      {1, N, C, 4 * C}, {1, N, C, 3 * C}, {1, N, C, C}, {1, N, 4 * C, C},
      {1, C, 3 * C, N}, {1, C, C, N}, {1, C, 4 * C, N}, {1, 4 * C, C, N},
      {1, C, N, 3 * C}, {1, C, N, C}, {1, C, N, 4 * C}, {1, 4 * C, N, C},
      // the tied lm head: wt·xᵀ, dout·wt, doutᵀ·x
      {1, V, C, N}, {1, N, V, C}, {1, V, N, C},
      // attention's 48 heads: scores, att·v and dq, and dkᵀ / dvᵀ
      {48, 1024, 64, 1024}, {48, 1024, 1024, 64}, {48, 64, 1024, 1024},
      // one sequence's qkv product; a square one
      {1, 1024, C, 3 * C}, {1, 4096, 4096, 4096},
      // the forward's qkv and fc products, and qkv's dx, on values like the model's
      {1, N, C, 3 * C, Values::Model}, {1, N, C, 4 * C, Values::Model}, {1, C, 3 * C, N, Values::Model},
      // decoding (memory-bound)
      {1, 1, C, V}, {1, V, C, 1}, {1, 3 * C, C, 1}, {1, C, 4 * C, 1}, {1, 4 * C, C, 5},
  };
  std::vector<MatMulFigure> figures;
  std::uint64_t seed = 11;
  for (Shape s : shapes) {
    figures.push_back(measureMatMul(dev, blas, s, seed++));
    std::fflush(stdout);
  }

  const double peak = cublasTflops(dev, blas, 8192);
  const double fma = fmaProbeTflops(dev);
  const double copy = copyGbps(dev);
  const auto [queuedUs, eachUs] = launchMicroseconds(dev);
  const double rawUs = rawLaunchMicroseconds(dev);
  needBlas(cublasDestroy(blas), "cublasDestroy");

  fmt::print("{:<22} {:<44} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}   {}\n", "shape", "fma chain bits", "ms", "TFLOP/s",
             "DGEMM", "x DGEMM", "GB/s", "% copy", "named tilings (TFLOP/s)");
  bool allIdentical = true;
  for (const auto& f : figures) {
    allIdentical = allIdentical && f.identical;
    std::string tilings;
    for (const auto& [t, tf] : f.tilings) tilings += fmt::format("{} {:.2f}  ", tilingName(t), tf);
    fmt::print("{:<22} {:<44} {:>9.3f} {:>9.2f} {:>9.2f} {:>8.2f} {:>8.0f} {:>7.1f}%   {}\n", f.shape.name(),
               f.identical ? "same (" + f.check + ")" : "DIFFER (" + f.check + ")", f.ms, f.tflops, f.blasTflops,
               f.blasTflops > 0 ? f.tflops / f.blasTflops : 0.0, f.gbps, 100.0 * f.gbps / copy, tilings);
  }
  fmt::print("\nceilings on this GPU: cuBLAS DGEMM 8192^3 {:.2f} TFLOP/s; fp64 FMA probe (vector units) {:.2f}\n\n",
             peak, fma);
  fmt::print("device-to-device copy {:.0f} GB/s (read + write); a small launch costs {:.2f} us queued, {:.2f} us "
             "when every launch is checked\n\n",
             copy, queuedUs, eachUs);

  for (const auto& f : figures)
    fmt::print("RESULT|matMul {} bit-identical to the fma chain ({})|{}|\n", f.shape.name(), f.check,
               f.identical ? "PASS" : "FAIL");
  for (const auto& f : figures)
    if (f.identical)
      fmt::print("RESULT|matMul {} TFLOP/s|{:.2f}x cuBLAS DGEMM ({:.2f})|{:.2f}\n", f.shape.name(),
                 f.tflops / f.blasTflops, f.blasTflops, f.tflops);
  for (const auto& f : figures)
    if (f.identical && f.shape.memoryBound())
      fmt::print("RESULT|matMul {} GB/s|{:.1f}% of copy|{:.0f}\n", f.shape.name(), 100.0 * f.gbps / copy, f.gbps);
  fmt::print("RESULT|device-to-device copy GB/s|ceiling for memory-bound|{:.0f}\n", copy);
  fmt::print("RESULT|small launch queued (us)|deferred checks|{:.2f}\n", queuedUs);
  fmt::print("RESULT|small launch raw (us)|no handler: the floor|{:.2f}\n", rawUs);
  fmt::print("RESULT|small launch checked (us)|each launch waited for|{:.2f}\n", eachUs);
  fmt::print("RESULT|fp64 cuBLAS DGEMM 8192^3 TFLOP/s|peak|{:.2f}\n", peak);
  fmt::print("RESULT|fp64 FMA probe TFLOP/s|vector units|{:.2f}\n", fma);
  const ExactLtTally tally = exactLtTally();
  fmt::print("RESULT|exact shapes on verified cuBLASLt / own kernel|{} / {}|{} candidates refused (bits differed)\n",
             tally.onLt, tally.onOwn, tally.refused);
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
