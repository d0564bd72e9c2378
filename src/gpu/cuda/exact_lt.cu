// Exact products through cuBLASLt, each algorithm verified against the own tensor-core kernel
// before it runs a shape (osprey/gpu/cuda/exact_lt.hpp says why and how).
//
// Row-major in, column-major in cuBLASLt: out (rows x cols) = a (rows x inner) · b (inner x cols) is,
// read column-major, outᵀ (cols x rows) = bᵀ (cols x inner) · aᵀ (inner x rows), with no transposes:
// b's memory is bᵀ with leading dimension cols, a's is aᵀ with leading dimension inner. Each
// output is sum_k b[k][j] · a[i][k], the same terms (fma(x, y, acc) = fma(y, x, acc)) in the same
// order.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/cuda/exact_lt.hpp"

namespace osprey {
namespace {

constexpr int kCandidates = 16;                         // asked of the heuristic
constexpr int kTimedRuns = 3;                           // a round, after one warm-up run
// Rounds of timing, the candidates taking turns within each; a candidate's time is its best round.
// (One round decided between algorithms within a few per cent of each other by the noise of the
// first products a process makes: the same shape kept a 31 TFLOP/s algorithm in one run and a
// 40 TFLOP/s one in another.)
constexpr int kTimingRounds = 3;
constexpr std::size_t kWorkspace = std::size_t{32} << 20;  // offered to every algorithm
constexpr std::size_t kMostCheckBytes = std::size_t{4} << 30;

// A shape as the choice depends on it: sizes, batch, the alignment every operand shares, and which
// operand is held transposed.
using Key = std::array<std::int64_t, 6>;

// cuBLASLt's descriptors for one shape, made and destroyed together.
struct Descriptors {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, d = nullptr;  // bᵀ, aᵀ, outᵀ
  cublasLtMatmulPreference_t preference = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (preference) (void)cublasLtMatmulPreferenceDestroy(preference);
    if (d) (void)cublasLtMatrixLayoutDestroy(d);
    if (y) (void)cublasLtMatrixLayoutDestroy(y);
    if (x) (void)cublasLtMatrixLayoutDestroy(x);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};

// What runs one shape: a verified cuBLASLt algorithm with the descriptors it was chosen with (kept,
// so a product after the first makes none), or the own kernel.
struct Choice {
  bool lt = false;
  cublasLtMatmulAlgo_t algo{};
  std::shared_ptr<const Descriptors> descriptors;
};

// One device's handle, workspace and choices.
struct DeviceState {
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  unsigned* tiny = nullptr;  // the epoch of the last product whose operands held a tiny value
  unsigned epoch = 0;        // of the product being queued: no flag to clear between products
  bool usable = false;  // false when the handle or workspace could not be had: the own kernel runs
  int multiprocessors = 0;
  std::map<Key, Choice> chosen;
  int refused = 0;
};

std::mutex g_mutex;
std::map<int, std::unique_ptr<DeviceState>> g_devices;

// OSPREY_EXACT_LT=off: every exact product on the device's own kernels, cuBLASLt never asked (for a
// user who would rather not rely on a measured library, and to tell the two apart in a profile).
bool ltRefusedByUser() {
  static const bool off = [] {
    const char* env = std::getenv("OSPREY_EXACT_LT");
    return env != nullptr && std::string(env) == "off";
  }();
  return off;
}

// The current device's state, made on first use.
DeviceState& stateOfCurrentDevice() {
  int device = 0;
  (void)cudaGetDevice(&device);
  auto& slot = g_devices[device];
  if (!slot) {
    slot.reset(new DeviceState);
    slot->usable = !ltRefusedByUser() && cublasLtCreate(&slot->lt) == CUBLAS_STATUS_SUCCESS &&
                   cudaMalloc(&slot->workspace, kWorkspace) == cudaSuccess &&
                   cudaMalloc(&slot->tiny, sizeof(unsigned)) == cudaSuccess &&
                   cudaMemset(slot->tiny, 0, sizeof(unsigned)) == cudaSuccess &&  // no epoch is 0
                   cudaDeviceGetAttribute(&slot->multiprocessors, cudaDevAttrMultiProcessorCount, device) == cudaSuccess;
  }
  return *slot;
}

// OSPREY_EXACT_LT_REPORT set (to anything): each shape's choice, with the times it was chosen by,
// each tiny operand value found and each product recomputed, on stderr; for finding where a
// product's time goes.
bool reporting() {
  static const bool on = std::getenv("OSPREY_EXACT_LT_REPORT") != nullptr;
  return on;
}

// "batch x (rows x inner) * (inner x cols)", as the report names a product (aT or bT: held transposed).
std::string shapeText(Index batch, Index rows, Index inner, Index cols, Transposed layout = Transposed::None) {
  return fmt::format("{} x ({} x {}){} * ({} x {}){}", batch, rows, inner, layout == Transposed::A ? " held as aT" : "",
                     inner, cols, layout == Transposed::B ? " held as bT" : "");
}

// cuBLASLt's id of an algorithm (-1 when it cannot be read), for reports and errors.
int idOf(const cublasLtMatmulAlgo_t& algo) {
  int id = -1;
  std::size_t written = 0;
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written);
  return id;
}

// The next product's epoch (never 0, the flag's first value).
unsigned nextEpoch(DeviceState& state) {
  if (++state.epoch == 0) ++state.epoch;
  return state.epoch;
}

// The largest power of two up to 256 that divides every operand's address and every product's
// stride in bytes (the alignment cuBLASLt's candidates must be allowed to assume).
std::int64_t alignmentOf(const double* out, const double* a, const double* b, Index batch, Index rows, Index inner,
                         Index cols, Transposed layout) {
  std::uint64_t bits = reinterpret_cast<std::uintptr_t>(out) | reinterpret_cast<std::uintptr_t>(a) |
                       reinterpret_cast<std::uintptr_t>(b) | 256u;
  if (batch > 1)
    bits |= static_cast<std::uint64_t>(rows * cols * 8) | static_cast<std::uint64_t>(rows * inner * 8) |
            static_cast<std::uint64_t>(inner * cols * 8);
  bits |= static_cast<std::uint64_t>(cols * 8) | static_cast<std::uint64_t>(inner * 8);  // leading dimensions
  if (layout == Transposed::A) bits |= static_cast<std::uint64_t>(rows * 8);             // a's, held (inner, rows)
  return static_cast<std::int64_t>(bits & (~bits + 1));
}

// A held transposed, (inner, rows) row-major, is (rows x inner) column-major: cuBLASLt's B operand
// aᵀ as the transpose of that. B held transposed, (cols, inner), is (inner x cols) column-major:
// its A operand bᵀ as the transpose of that. The terms of each output and their order stay those
// of the untransposed product.
bool describe(Descriptors& s, Index batch, Index rows, Index inner, Index cols, std::int64_t alignment,
              Transposed layout) {
  const auto ok = [](cublasStatus_t status) { return status == CUBLAS_STATUS_SUCCESS; };
  const auto u = [](Index n) { return static_cast<std::uint64_t>(n); };
  if (!ok(cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_64F, CUDA_R_64F))) return false;
  const cublasOperation_t transposed = CUBLAS_OP_T;
  if (layout == Transposed::B &&
      !ok(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed))))
    return false;
  if (layout == Transposed::A &&
      !ok(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transposed, sizeof(transposed))))
    return false;
  const bool bHeld = layout == Transposed::B, aHeld = layout == Transposed::A;
  if (!ok(cublasLtMatrixLayoutCreate(&s.x, CUDA_R_64F, bHeld ? u(inner) : u(cols), bHeld ? u(cols) : u(inner),
                                     bHeld ? inner : cols)) ||
      !ok(cublasLtMatrixLayoutCreate(&s.y, CUDA_R_64F, aHeld ? u(rows) : u(inner), aHeld ? u(inner) : u(rows),
                                     aHeld ? rows : inner)) ||
      !ok(cublasLtMatrixLayoutCreate(&s.d, CUDA_R_64F, static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows),
                                     cols)))
    return false;
  if (batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    const std::int64_t strides[3] = {inner * cols, rows * inner, rows * cols};
    const cublasLtMatrixLayout_t layouts[3] = {s.x, s.y, s.d};
    for (int i = 0; i < 3; ++i) {
      if (!ok(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count))) ||
          !ok(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                               sizeof(strides[i]))))
        return false;
    }
  }
  if (!ok(cublasLtMatmulPreferenceCreate(&s.preference))) return false;
  const std::uint64_t workspace = kWorkspace;
  const auto bytes = static_cast<std::uint32_t>(alignment);
  return ok(cublasLtMatmulPreferenceSetAttribute(s.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof(workspace))) &&
         ok(cublasLtMatmulPreferenceSetAttribute(s.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &bytes,
                                                 sizeof(bytes))) &&
         ok(cublasLtMatmulPreferenceSetAttribute(s.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &bytes,
                                                 sizeof(bytes))) &&
         ok(cublasLtMatmulPreferenceSetAttribute(s.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &bytes,
                                                 sizeof(bytes))) &&
         ok(cublasLtMatmulPreferenceSetAttribute(s.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &bytes,
                                                 sizeof(bytes)));
}

cublasStatus_t runLt(const DeviceState& state, const Descriptors& s, const cublasLtMatmulAlgo_t& algo, double* out,
                     const double* a, const double* b, cudaStream_t stream) {
  const double one = 1.0, zero = 0.0;
  return cublasLtMatmul(state.lt, s.desc, &one, b, s.x, a, s.y, &zero, out, s.d, out, s.d, &algo, state.workspace,
                        kWorkspace, stream);
}

// Adversarial operands for the check: ±(1 + f)·2^e with e over [-40, 40] (random signs, so sums
// cancel), one value in 16 a signed zero. Element i of operand `which`. (No value below
// kTinyMagnitude: products with such operands never run on cuBLASLt, see anyTinyOperand.)
__global__ void fillCheckOperand(double* v, Index n, unsigned which) {
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(blockDim.x) * gridDim.x) {
    std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull + which * 0xD1B54A32D192ED03ull + 1;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const double mantissa = 1.0 + static_cast<double>(h >> 12) * 0x1p-52;
    const int exponent = static_cast<int>((h >> 3) % 81) - 40;
    const bool negative = h & 1;
    double x = ldexp(mantissa, exponent);
    if ((h >> 8) % 16 == 0) x = 0.0;
    v[i] = negative ? -x : x;
  }
}

// The one difference measured between cuBLASLt's FP64 algorithms and the fma chain: where the
// chain ends at -0.0 (a negative sum too small for any subnormal, rounded to zero), cuBLASLt gives
// +0.0 (tests/cuda: CudaMatMul.AnUnderflowedChainKeepsItsNegativeZero). A chain reaches -0.0 only
// through such an underflow: from +0.0, an exact zero sum rounds to +0.0. When every operand is
// zero or at least 2^-250 in magnitude, every non-zero product is at least 2^-500, and a running
// sum can only cancel against a product to a residue of at least 2^-500 · 2^-53, so no partial
// sum ever underflows and the chain never reaches -0.0. A product whose operands hold a smaller
// non-zero value is recomputed by exactChainFallback.
constexpr double kTinyMagnitude = 0x1p-250;

// Whether `x` is a non-zero value below kTinyMagnitude in magnitude (NaN compares false and counts
// as not tiny; infinities and NaN gave the chain's bits in the check).
__device__ __forceinline__ bool isTiny(double x) { return x != 0.0 && fabs(x) < kTinyMagnitude; }

// The scan reads every element of both operands once, so it runs at memory speed only with many
// loads in flight: each thread loads kScanBatch pairs of doubles (16 bytes each) before it tests
// any, the pairs of a batch `stride` apart so that a warp's loads share cache lines. Every
// exact product on cuBLASLt pays for it, the lm head's 1.6 GB operand included.
constexpr int kScanBatch = 8;
constexpr int kScanThreads = 256;

// scanForTiny's pairs: v is 16-byte aligned; element i of v is element i + offset of the operand.
__device__ bool scanPairsForTiny(const double* v, Index n, Index offset, Index first, Index stride, char which,
                                 unsigned epoch, bool report) {
  const Index pairs = n / 2;
  const double2* p = reinterpret_cast<const double2*>(v);
  bool found = false;
  for (Index i = first; i < pairs; i += stride * kScanBatch) {
    double2 x[kScanBatch];
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) {
      const Index at = i + stride * u;
      x[u] = at < pairs ? p[at] : make_double2(0.0, 0.0);
    }
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) {
      const bool small = isTiny(x[u].x) || isTiny(x[u].y);
      if (report && small && !found)
        printf("exact product %u: operand %c element %lld or the next is %a / %a, below 2^-250\n", epoch, which,
               static_cast<long long>(offset + 2 * (i + stride * u)), x[u].x, x[u].y);
      found |= small;
    }
  }
  if (first == 0 && n % 2 == 1 && isTiny(v[n - 1])) {  // the odd last element
    if (report) printf("exact product %u: operand %c element %lld is %a, below 2^-250\n", epoch, which,
                       static_cast<long long>(offset + n - 1), v[n - 1]);
    found = true;
  }
  return found;
}

// True when one of v's n elements that this thread visits (pairs first, first + stride, ...) is
// tiny; with `report`, the first such is printed. Pairs are read from the first 16-byte boundary
// on; an element before it, and an odd one after the last pair, are thread 0's.
__device__ bool scanForTiny(const double* v, Index n, Index first, Index stride, char which, unsigned epoch,
                            bool report) {
  bool found = false;
  Index skipped = 0;
  if (n > 0 && (reinterpret_cast<std::uintptr_t>(v) & 15) != 0) {
    if (first == 0 && isTiny(v[0])) {
      if (report) printf("exact product %u: operand %c element 0 is %a, below 2^-250\n", epoch, which, v[0]);
      found = true;
    }
    skipped = 1;
  }
  return found | scanPairsForTiny(v + skipped, n - skipped, skipped, first, stride, which, epoch, report);
}

// *tiny = epoch when a (na) or b (nb) holds a tiny value.
// Each product has its own epoch, so the flag needs no clearing launch; should the counter wrap
// onto a stale flag, the fallback merely recomputes the same chain.
__global__ void anyTinyOperand(const double* a, Index na, const double* b, Index nb, unsigned* tiny, unsigned epoch,
                               bool report) {
  const Index first = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  const bool found =
      scanForTiny(a, na, first, stride, 'a', epoch, report) | scanForTiny(b, nb, first, stride, 'b', epoch, report);
  if (__syncthreads_or(found) && threadIdx.x == 0) *tiny = epoch;
}

// Blocks for a scan of n doubles: enough that each thread has about one batch of pairs, at most 8
// a multiprocessor (a grid-stride loop takes the rest).
unsigned scanBlocks(Index n, int multiprocessors) {
  const Index perBlock = Index{kScanThreads} * kScanBatch * 2;
  const Index want = (n + perBlock - 1) / perBlock;
  const Index most = Index{8} * (multiprocessors > 0 ? multiprocessors : 132);
  return static_cast<unsigned>(want < 1 ? 1 : want > most ? most : want);
}

// When *tiny holds this product's epoch, every output again as the plain fma chain in k order
// from +0.0, one thread an output (slow, and only for operands no trained GPT-2 holds); otherwise
// nothing.
__global__ void exactChainFallback(const unsigned* tiny, unsigned epoch, double* out, const double* a, const double* b,
                                   Index batch, Index rows, Index inner, Index cols, Transposed layout, bool report) {
  if (*tiny != epoch) return;
  if (report && blockIdx.x == 0 && threadIdx.x == 0)
    printf("exact product %u: %lld x (%lld x %lld) * (%lld x %lld) recomputed as the plain chain\n", epoch,
           static_cast<long long>(batch), static_cast<long long>(rows), static_cast<long long>(inner),
           static_cast<long long>(inner), static_cast<long long>(cols));
  const Index n = batch * rows * cols, stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index o = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += stride) {
    const Index z = o / (rows * cols), i = o / cols % rows, j = o % cols;
    // a[i][k] and b[k][j] of product z, wherever the layout holds them.
    const bool aHeld = layout == Transposed::A, bHeld = layout == Transposed::B;
    const double* x = a + z * rows * inner + (aHeld ? i : i * inner);
    const double* y = b + z * inner * cols + (bHeld ? j * inner : j);
    const Index xStep = aHeld ? rows : 1, yStep = bHeld ? 1 : cols;
    double acc = 0.0;
    for (Index k = 0; k < inner; ++k) acc = __fma_rn(x[k * xStep], y[k * yStep], acc);
    out[o] = acc;
  }
}

// With OSPREY_EXACT_LT_REPORT, each product on cuBLASLt is timed where it runs: events around the
// operand scan, the product and the fallback, waited for at once, and the host's time to queue the
// product, printed on one line. (The report is for finding where time goes; it waits on every
// product, so it is never on in a timed run.)
class ProductTimes {
 public:
  explicit ProductTimes(cudaStream_t stream) {
    if (!reporting()) return;
    for (cudaEvent_t& e : m_events) (void)cudaEventCreate(&e);
    (void)cudaEventRecord(m_events[0], stream);
  }
  ProductTimes(const ProductTimes&) = delete;
  ProductTimes& operator=(const ProductTimes&) = delete;
  ~ProductTimes() {
    for (cudaEvent_t e : m_events)
      if (e) (void)cudaEventDestroy(e);
  }
  void mark(cudaStream_t stream) {
    if (reporting() && m_marked < 3) (void)cudaEventRecord(m_events[++m_marked], stream);
  }
  void report(const std::string& shape, int algorithm, double queueUs) {
    if (!reporting() || m_marked != 3 || cudaEventSynchronize(m_events[3]) != cudaSuccess) return;
    float ms[3] = {};
    for (int i = 0; i < 3; ++i) (void)cudaEventElapsedTime(&ms[i], m_events[i], m_events[i + 1]);
    std::fprintf(stderr, "exact product %s on cuBLASLt algorithm %d: scan %.4f ms, product %.4f ms, fallback %.4f ms, "
                 "queued in %.1f us\n", shape.c_str(), algorithm, ms[0], ms[1], ms[2], queueUs);
  }

 private:
  cudaEvent_t m_events[4] = {nullptr, nullptr, nullptr, nullptr};
  int m_marked = 0;
};

// How many of n doubles differ in their bits between x and y.
__global__ void countDifferences(const double* x, const double* y, Index n, unsigned long long* count) {
  unsigned long long mine = 0;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(blockDim.x) * gridDim.x)
    mine += __double_as_longlong(x[i]) != __double_as_longlong(y[i]);
  if (mine) atomicAdd(count, mine);
}

// Device memory for one check, freed together.
struct CheckBuffers {
  double *a = nullptr, *b = nullptr, *want = nullptr, *got = nullptr;
  unsigned long long* count = nullptr;
  ~CheckBuffers() {
    if (a) (void)cudaFree(a);
    if (b) (void)cudaFree(b);
    if (want) (void)cudaFree(want);
    if (got) (void)cudaFree(got);
    if (count) (void)cudaFree(count);
  }
};

// Time of kTimedRuns runs of `run` after one warm-up, in ms; infinity when a run fails.
template <class Run>
float timeOf(Run run, cudaStream_t stream, cudaEvent_t start, cudaEvent_t end) {
  if (!run()) return std::numeric_limits<float>::infinity();
  (void)cudaEventRecord(start, stream);
  for (int r = 0; r < kTimedRuns; ++r)
    if (!run()) return std::numeric_limits<float>::infinity();
  (void)cudaEventRecord(end, stream);
  if (cudaEventSynchronize(end) != cudaSuccess) return std::numeric_limits<float>::infinity();
  float ms = 0.0f;
  (void)cudaEventElapsedTime(&ms, start, end);
  return ms;
}

// The choice for one shape: the verified candidates and the own kernel timed on the check's
// operands. Any CUDA failure on the way leaves the own kernel (a cuBLASLt candidate is an option,
// never a need), and clears the error it left.
Choice choose(DeviceState& state, const Descriptors& s, Index batch, Index rows, Index inner, Index cols,
              Transposed layout, cudaStream_t stream, const OwnExactProduct& own) {
  Choice keep;  // the own kernel
  std::array<cublasLtMatmulHeuristicResult_t, kCandidates> found{};
  int count = 0;
  if (cublasLtMatmulAlgoGetHeuristic(state.lt, s.desc, s.x, s.y, s.d, s.d, s.preference, kCandidates, found.data(),
                                     &count) != CUBLAS_STATUS_SUCCESS ||
      count < 1)
    return keep;
  std::array<cublasLtMatmulAlgo_t, kCandidates> whole{};
  int wholeCount = 0;
  for (int i = 0; i < count; ++i)
    if (checkKeepsKWhole(found[i].algo).ok()) whole[wholeCount++] = found[i].algo;
  if (wholeCount == 0) return keep;

  const auto na = static_cast<std::size_t>(batch * rows * inner), nb = static_cast<std::size_t>(batch * inner * cols),
             nout = static_cast<std::size_t>(batch * rows * cols);
  const std::size_t bytes = 8 * (na + nb + 2 * nout);
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess || bytes > free / 4 || bytes > kMostCheckBytes) return keep;
  CheckBuffers m;  // 256-byte aligned: every candidate allowed for `alignment` may run on them
  if (cudaMalloc(&m.a, 8 * na) != cudaSuccess || cudaMalloc(&m.b, 8 * nb) != cudaSuccess ||
      cudaMalloc(&m.want, 8 * nout) != cudaSuccess || cudaMalloc(&m.got, 8 * nout) != cudaSuccess ||
      cudaMalloc(&m.count, sizeof(unsigned long long)) != cudaSuccess) {
    (void)cudaGetLastError();
    return keep;
  }
  fillCheckOperand<<<264, 256, 0, stream>>>(m.a, static_cast<Index>(na), 1);
  fillCheckOperand<<<264, 256, 0, stream>>>(m.b, static_cast<Index>(nb), 2);
  if (own(m.want, m.a, m.b) != cudaSuccess) {
    (void)cudaGetLastError();
    return keep;
  }
  cudaEvent_t start = nullptr, end = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess) {
    if (start) (void)cudaEventDestroy(start);
    (void)cudaGetLastError();
    return keep;
  }
  // The candidates that compute the fma chain, each checked bit for bit against the own kernel.
  std::array<cublasLtMatmulAlgo_t, kCandidates> exact{};
  int exactCount = 0;
  for (int w = 0; w < wholeCount; ++w) {
    const cublasLtMatmulAlgo_t& algo = whole[w];
    unsigned long long differing = 0;
    if (cudaMemsetAsync(m.count, 0, sizeof(differing), stream) != cudaSuccess ||
        runLt(state, s, algo, m.got, m.a, m.b, stream) != CUBLAS_STATUS_SUCCESS) {
      (void)cudaGetLastError();
      continue;
    }
    countDifferences<<<264, 256, 0, stream>>>(m.want, m.got, static_cast<Index>(nout), m.count);
    if (cudaMemcpyAsync(&differing, m.count, sizeof(differing), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (differing != 0) {  // not the fma chain in k order: never used for this shape
      ++state.refused;
      continue;
    }
    exact[exactCount++] = algo;
  }
  // Each timed as it will run (a cuBLASLt candidate with the operand scan and the idle fallback
  // launch), in rounds; times[0] is the own kernel's, times[1 + i] exact[i]'s.
  std::array<float, kCandidates + 1> times;
  times.fill(std::numeric_limits<float>::infinity());
  for (int round = 0; round < kTimingRounds; ++round) {
    times[0] = std::min(times[0], timeOf([&] { return own(m.got, m.a, m.b) == cudaSuccess; }, stream, start, end));
    for (int i = 0; i < exactCount; ++i) {
      const cublasLtMatmulAlgo_t& algo = exact[i];
      const float ms = timeOf(
          [&] {
            const unsigned epoch = nextEpoch(state);
            anyTinyOperand<<<scanBlocks(static_cast<Index>(na + nb), state.multiprocessors), kScanThreads, 0, stream>>>(
                m.a, static_cast<Index>(na), m.b, static_cast<Index>(nb), state.tiny, epoch, false);
            if (runLt(state, s, algo, m.got, m.a, m.b, stream) != CUBLAS_STATUS_SUCCESS) return false;
            exactChainFallback<<<528, 256, 0, stream>>>(state.tiny, epoch, m.got, m.a, m.b, batch, rows, inner, cols,
                                                        layout, false);
            return cudaGetLastError() == cudaSuccess;
          },
          stream, start, end);
      times[1 + i] = std::min(times[1 + i], ms);
    }
  }
  const float ownMs = times[0];
  float best = ownMs;
  for (int i = 0; i < exactCount; ++i) {
    if (reporting()) std::fprintf(stderr, "  cuBLASLt algorithm %d: %.4f ms\n", idOf(exact[i]), times[1 + i] / kTimedRuns);
    if (times[1 + i] < best) {
      best = times[1 + i];
      keep = Choice{true, exact[i], nullptr};
    }
  }
  if (reporting())
    std::fprintf(stderr, "exact product %s: %s, %.4f ms (own kernel %.4f ms)\n",
                 shapeText(batch, rows, inner, cols, layout).c_str(), keep.lt ? "cuBLASLt" : "own kernel",
                 best / kTimedRuns,
                 ownMs / kTimedRuns);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(end);
  (void)cudaStreamSynchronize(stream);
  (void)cudaGetLastError();
  return keep;
}

}  // namespace

Result<void> checkKeepsKWhole(const cublasLtMatmulAlgo_t& algo) {
  std::uint32_t splits = 1, scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &written) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme),
                                           &written) != CUBLAS_STATUS_SUCCESS)
    return Error{"cuBLASLt algorithm: its split-K configuration cannot be read, so it is refused for exact products"};
  if (splits > 1 || scheme != CUBLASLT_REDUCTION_SCHEME_NONE)
    return Error{fmt::format("cuBLASLt algorithm {} splits k into {} parts (reduction scheme {}): a split sum is not "
                             "the exact contract's fma chain in k order, so it is refused for exact products",
                             idOf(algo), splits, scheme)};
  return {};
}

cudaError_t exactProductChosen(double* out, const double* a, const double* b, Index batch, Index rows, Index inner,
                               Index cols, cudaStream_t stream, const OwnExactProduct& own, Transposed layout) {
  if (layout != Transposed::None && batch != 1) return cudaErrorInvalidValue;  // one product held transposed
  const std::int64_t alignment = alignmentOf(out, a, b, batch, rows, inner, cols, layout);
  const Key key{batch, rows, inner, cols, alignment, static_cast<std::int64_t>(layout)};
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) return cudaGetLastError();
  std::lock_guard lock(g_mutex);
  DeviceState& state = stateOfCurrentDevice();
  if (!state.usable) return own(out, a, b);
  auto at = state.chosen.find(key);
  if (at == state.chosen.end()) {
    if (capturing != cudaStreamCaptureStatusNone) return own(out, a, b);
    auto s = std::make_shared<Descriptors>();
    Choice c;
    const bool described = describe(*s, batch, rows, inner, cols, alignment, layout);
    if (described) c = choose(state, *s, batch, rows, inner, cols, layout, stream, own);
    if (reporting())
      std::fprintf(stderr, "exact product %s, operands aligned to %lld bytes: %s\n",
                   shapeText(batch, rows, inner, cols, layout).c_str(), static_cast<long long>(alignment),
                   !described ? "own kernel (cuBLASLt took no descriptors)" : c.lt ? "cuBLASLt" : "own kernel");
    if (c.lt) c.descriptors = std::move(s);
    at = state.chosen.insert(std::make_pair(key, std::move(c))).first;
  }
  if (!at->second.lt) return own(out, a, b);
  const Descriptors& s = *at->second.descriptors;
  // In stream order: look for tiny operands, the product, and its recomputation
  // should the flag be set (see kTinyMagnitude). No host wait: the launches stay queued.
  const unsigned epoch = nextEpoch(state);
  ProductTimes times(stream);
  const Index na = batch * rows * inner, nb = batch * inner * cols;
  anyTinyOperand<<<scanBlocks(na + nb, state.multiprocessors), kScanThreads, 0, stream>>>(a, na, b, nb, state.tiny,
                                                                                         epoch, reporting());
  times.mark(stream);
  const auto queued = std::chrono::steady_clock::now();
  if (runLt(state, s, at->second.algo, out, a, b, stream) != CUBLAS_STATUS_SUCCESS) return cudaErrorLaunchFailure;
  const double queueUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - queued).count();
  times.mark(stream);
  exactChainFallback<<<528, 256, 0, stream>>>(state.tiny, epoch, out, a, b, batch, rows, inner, cols, layout,
                                              reporting());
  times.mark(stream);
  times.report(shapeText(batch, rows, inner, cols, layout), idOf(at->second.algo), queueUs);
  return cudaGetLastError();
}

ExactLtTally exactLtTally() {
  std::lock_guard lock(g_mutex);
  ExactLtTally t;
  DeviceState& state = stateOfCurrentDevice();
  for (const auto& [key, choice] : state.chosen) (choice.lt ? t.onLt : t.onOwn) += 1;
  t.refused = state.refused;
  return t;
}

}  // namespace osprey
