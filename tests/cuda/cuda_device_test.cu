// The cuda device runtime's own promises, beyond the typed effect tests: no fallback, a strict
// fault inside a kernel returned with its operands (by the launch itself when every launch is
// checked; otherwise by the next read-back, naming the kernel that faulted first), out-of-memory
// naming the size, cached blocks reused safely without a synchronisation, the exact matMul
// bit-identical to the contract's fma chain (around every tile edge of every kernel and tiling, on
// every product GPT-2 makes, in every input regime), fold in element order across its chunks,
// indexOf's smallest hit.
//
// Kernels live in the named functions below (an nvcc extended lambda may not be defined inside a
// gtest body, which is a private member function).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cublasLt.h>

#include "handlers.hpp"
#include "osprey/gpu/cuda/exact_lt.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/kernel_clock.hpp"
#include "osprey/gpu/size_class.hpp"
#include "osprey/gpu/surface.hpp"
#include "osprey/transposed.hpp"
#include "osprey/under.hpp"

namespace osprey::testing {
namespace {

using CudaBuffer = GpuBuffer<CudaDevice>;

std::shared_ptr<CudaDevice> cudaDevice() {
  auto device = CudaDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return *device;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sets an environment variable for one scope, then restores it.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (m_old) ::setenv(m_name, m_old->c_str(), 1);
    else ::unsetenv(m_name);
  }

 private:
  const char* m_name;
  std::optional<std::string> m_old;
};

// Checks every launch as it completes for one scope (the device is shared), then restores the mode.
class ScopedCheckEachLaunch {
 public:
  ScopedCheckEachLaunch(std::shared_ptr<CudaDevice> device, bool each = true)
      : m_device(std::move(device)), m_before(m_device->checksEachLaunch()) {
    m_device->setCheckEachLaunch(each);
  }
  ~ScopedCheckEachLaunch() { m_device->setCheckEachLaunch(m_before); }

 private:
  std::shared_ptr<CudaDevice> m_device;
  bool m_before;
};

// ---- kernels ------------------------------------------------------------------------------------

// Element i is 2 * i, except at `at`, where the index maths overflows (INT64_MAX * 2).
Result<CudaBuffer> buildOverflowingAt(const std::shared_ptr<CudaDevice>& dev, Index n, Index at) {
  return gpuBuild(dev, n, [=] OSPREY_FN(Index i) -> Scalar {
    const Int factor = i == at ? Int(Index{INT64_MAX}) : Int(i);
    return static_cast<Scalar>((factor * Int(2)).raw());
  });
}

// Element i is i / (i - 5): a division by zero at i = 5 only.
Result<CudaBuffer> buildDividingByZeroAtFive(const std::shared_ptr<CudaDevice>& dev, Index n) {
  return gpuBuild(dev, n, [=] OSPREY_FN(Index i) -> Scalar {
    return static_cast<Scalar>((Int(i) / (Int(i) - Int(5))).raw());
  });
}

// A combine whose index maths divides by zero on the first element it sees.
Result<Scalar> foldDividingByZero(const CudaBuffer& x) {
  return gpuFold(x, 0.0, [=] OSPREY_FN(Scalar acc, Scalar v) -> Scalar {
    return acc + static_cast<Scalar>((Int(static_cast<Index>(v)) / Int(0)).raw());
  });
}

// The same build through the handler, under `strictly`: only i = 7 overflows (one faulting
// thread, so the operands in the message are known).
Result<BufferOf<GpuCuda>> handlerBuildOverflowing(GpuCuda& h, Index n) {
  return h.build(n, [=] OSPREY_FN(Index i) -> Scalar {
    return static_cast<Scalar>((i == 7 ? Int(i) * Int(Index{INT64_MAX}) : Int(i)).raw());
  });
}

// Element i is x[i] + offset: a second kernel reading an earlier buffer.
Result<CudaBuffer> mapAdding(const CudaBuffer& x, Scalar offset) {
  return gpuMap(x, [=] OSPREY_FN(Scalar v) -> Scalar { return v + offset; });
}

// Element i is `value` everywhere.
Result<CudaBuffer> buildConstant(const std::shared_ptr<CudaDevice>& dev, Index n, Scalar value) {
  return gpuBuild(dev, n, [=] OSPREY_FN(Index) -> Scalar { return value; });
}

Result<Scalar> foldPlain(const CudaBuffer& x, Scalar seed) {
  return gpuFold(x, seed, [=] OSPREY_FN(Scalar acc, Scalar v) -> Scalar { return acc + v; });
}

// Not associative: a fold in any order but element order gives other bits.
Result<Scalar> foldHalving(const CudaBuffer& x, Scalar seed) {
  return gpuFold(x, seed, [=] OSPREY_FN(Scalar acc, Scalar v) -> Scalar { return acc * 0.5 + v; });
}

std::vector<Scalar> download(const CudaBuffer& b) {
  auto values = fromGpu(b);
  if (!values.ok()) throw std::runtime_error(values.error().message);
  return std::move(values).value();
}

CudaBuffer upload(const std::shared_ptr<CudaDevice>& dev, const std::vector<Scalar>& values) {
  auto b = toGpu(dev, std::span<const Scalar>(values));
  if (!b.ok()) throw std::runtime_error(b.error().message);
  return std::move(b).value();
}

// ---- open: the device, or an error; never the host ---------------------------------------------

TEST(CudaOpen, NamesTheGpu) {
  const std::string name = cudaDevice()->name();
  EXPECT_TRUE(name.rfind("cuda: ", 0) == 0) << name;
  EXPECT_GT(name.size(), std::string("cuda: ").size()) << name;
}

TEST(CudaOpen, AMissingDeviceNumberIsAnErrorNotAFallback) {
  ScopedEnvironment env("OSPREY_CUDA_DEVICE", "99");
  auto device = CudaDevice::open();
  ASSERT_FALSE(device.ok()) << "OSPREY_CUDA_DEVICE=99 opened " << (*device)->name();
  EXPECT_TRUE(contains(device.error().message, "no CUDA device 99")) << device.error().message;
  EXPECT_TRUE(contains(device.error().message, "OSPREY_CUDA_DEVICE")) << device.error().message;
}

TEST(CudaOpen, AMalformedDeviceNumberIsAnError) {
  ScopedEnvironment env("OSPREY_CUDA_DEVICE", "first");
  auto device = CudaDevice::open();
  ASSERT_FALSE(device.ok());
  EXPECT_TRUE(contains(device.error().message, "`first`")) << device.error().message;
}

TEST(CudaOpen, TheBoundaryAnswersWithTheGpu) {
  auto answer = onGpuDevice("cuda", [](auto& h) -> Result<std::string> { return h.device(); });
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(*answer, cudaDevice()->name());
}

TEST(CudaOpen, TheBoundaryReportsAMissingGpuInsteadOfRunningOnTheHost) {
  ScopedEnvironment env("OSPREY_CUDA_DEVICE", "99");
  auto answer = onGpuDevice("cuda", [](auto& h) -> Result<std::string> { return h.device(); });
  ASSERT_FALSE(answer.ok()) << "ran on " << *answer;
  EXPECT_TRUE(contains(answer.error().message, "no CUDA device 99")) << answer.error().message;
}

// ---- strict faults inside kernels ---------------------------------------------------------------

// With every launch checked, the launching operation returns the fault in the host's own words.
TEST(CudaFault, OverflowInsideAKernelIsTheLaunchingOperationsError) {
  auto dev = cudaDevice();
  ScopedCheckEachLaunch each(dev);
  auto faulted = buildOverflowingAt(dev, 100000, 63337);
  ASSERT_FALSE(faulted.ok());
  EXPECT_EQ(faulted.error().message, "integer overflow: 9223372036854775807 * 2");

  // The fault slot is clear again: the next launch succeeds and computes every element.
  auto clean = buildOverflowingAt(dev, 1000, -1);
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  const auto values = download(*clean);
  for (Index i = 0; i < 1000; ++i) ASSERT_EQ(values[static_cast<std::size_t>(i)], 2.0 * static_cast<Scalar>(i));
}

TEST(CudaFault, DivisionByZeroNamesItsOperands) {
  auto dev = cudaDevice();
  ScopedCheckEachLaunch each(dev);
  auto faulted = buildDividingByZeroAtFive(dev, 4099);
  ASSERT_FALSE(faulted.ok());
  EXPECT_EQ(faulted.error().message, "division by zero: 5 / 0");
}

TEST(CudaFault, AFaultInsideAFoldIsTheFoldsError) {
  auto dev = cudaDevice();
  auto x = upload(dev, {3.0, 4.0, 5.0});
  {
    ScopedCheckEachLaunch each(dev);
    auto folded = foldDividingByZero(x);
    ASSERT_FALSE(folded.ok());
    EXPECT_EQ(folded.error().message, "division by zero: 3 / 0");
  }
  {
    ScopedCheckEachLaunch deferred(dev, false);  // a fold reads its result back: it reports its own fault
    auto folded = foldDividingByZero(x);
    ASSERT_FALSE(folded.ok());
    EXPECT_TRUE(folded.error().message.rfind("division by zero: 3 / 0 (in fold<", 0) == 0) << folded.error().message;
  }
  auto clean = foldPlain(x, 0.0);
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  EXPECT_EQ(*clean, 12.0);
}

TEST(CudaFault, StrictlyReportsAKernelFaultThroughTheHandler) {
  GpuCuda h(cudaDevice());
  ScopedCheckEachLaunch each(h.runtime());
  auto result = strictly([&] { return handlerBuildOverflowing(h, 10); });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, "integer overflow: 7 * 9223372036854775807");
}

// ---- deferred fault checks (the default): launches do not wait ----------------------------------

// Five launches queued without a wait; the third faults. None of them reports anything; the next
// read-back does, with the third launch's number and the operands of its fault.
TEST(CudaDeferredFault, TheThirdOfFiveLaunchesIsNamedAtTheNextReadBack) {
  auto dev = cudaDevice();
  ScopedCheckEachLaunch deferred(dev, false);
  const unsigned long long before = dev->launches();
  auto first = buildOverflowingAt(dev, 5000, -1);
  auto second = buildConstant(dev, 5000, 1.5);
  auto third = buildOverflowingAt(dev, 5000, 4321);  // faults: INT64_MAX * 2
  auto fourth = buildDividingByZeroAtFive(dev, 3);    // no fault: i < 5
  ASSERT_TRUE(first.ok() && second.ok() && third.ok() && fourth.ok()) << "a launch waited for its kernel";
  auto fifth = mapAdding(*second, 1.0);
  ASSERT_TRUE(fifth.ok()) << fifth.error().message;
  EXPECT_EQ(dev->launches(), before + 5);

  auto read = fromGpu(*fifth);
  ASSERT_FALSE(read.ok()) << "the fault of launch " << before + 3 << " was not reported";
  const std::string& message = read.error().message;
  EXPECT_TRUE(message.rfind("integer overflow: 9223372036854775807 * 2 (in forEach<", 0) == 0) << message;
  EXPECT_TRUE(contains(message, fmt::format("over 5000 elements, launch {} on this device", before + 3))) << message;
  EXPECT_TRUE(contains(message, "found at download of 5000 doubles")) << message;

  // Reported once: the slot is clear, and work queued after the check is fine.
  auto again = fromGpu(*fifth);
  ASSERT_TRUE(again.ok()) << again.error().message;
  auto clean = buildOverflowingAt(dev, 1000, -1);
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  const auto values = download(*clean);
  for (Index i = 0; i < 1000; ++i) ASSERT_EQ(values[static_cast<std::size_t>(i)], 2.0 * static_cast<Scalar>(i));
}

// When two launches fault before a check, the first one is reported.
TEST(CudaDeferredFault, TheFirstOfTwoFaultingLaunchesIsReported) {
  auto dev = cudaDevice();
  ScopedCheckEachLaunch deferred(dev, false);
  const unsigned long long before = dev->launches();
  auto dividing = buildDividingByZeroAtFive(dev, 100);   // launch before + 1: 5 / 0
  auto overflowing = buildOverflowingAt(dev, 100, 50);  // launch before + 2: INT64_MAX * 2
  ASSERT_TRUE(dividing.ok() && overflowing.ok());
  auto flushed = dev->flush();
  ASSERT_FALSE(flushed.ok());
  EXPECT_TRUE(flushed.error().message.rfind("division by zero: 5 / 0 (in forEach<", 0) == 0) << flushed.error().message;
  EXPECT_TRUE(contains(flushed.error().message, fmt::format("launch {} on this device", before + 1)))
      << flushed.error().message;
  EXPECT_TRUE(contains(flushed.error().message, "found at flush")) << flushed.error().message;
  EXPECT_TRUE(dev->flush().ok());
}

// Every kind of read-back reports a pending fault: get, a fold's result, indexOf.
TEST(CudaDeferredFault, EveryReadBackReportsAPendingFault) {
  auto dev = cudaDevice();
  ScopedCheckEachLaunch deferred(dev, false);
  auto fine = buildConstant(dev, 10, 2.0);
  ASSERT_TRUE(fine.ok());

  ASSERT_TRUE(buildDividingByZeroAtFive(dev, 10).ok());
  auto one = gpuGet(*fine, 3);
  ASSERT_FALSE(one.ok());
  EXPECT_TRUE(contains(one.error().message, "found at read-back of one double")) << one.error().message;

  ASSERT_TRUE(buildDividingByZeroAtFive(dev, 10).ok());
  auto folded = foldPlain(*fine, 0.0);
  ASSERT_FALSE(folded.ok());
  EXPECT_TRUE(contains(folded.error().message, "division by zero: 5 / 0 (in forEach<")) << folded.error().message;

  ASSERT_TRUE(buildDividingByZeroAtFive(dev, 10).ok());
  auto found = gpuIndexOf(*fine, 2.0);
  ASSERT_FALSE(found.ok());
  EXPECT_TRUE(contains(found.error().message, "found at the result of indexOf over 10 elements")) << found.error().message;

  // get() through the handler throws DeviceFailure, which `strictly` turns into the Error.
  GpuCuda h(dev);
  ASSERT_TRUE(buildDividingByZeroAtFive(dev, 10).ok());
  auto viaHandler = strictly([&] { return h.get(*fine, 0); });
  ASSERT_FALSE(viaHandler.ok());
  EXPECT_TRUE(viaHandler.error().message.rfind("division by zero: 5 / 0", 0) == 0) << viaHandler.error().message;

  auto clean = gpuGet(*fine, 9);
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  EXPECT_EQ(*clean, 2.0);
}

// ---- memory -------------------------------------------------------------------------------------

TEST(CudaMemory, OutOfMemoryNamesTheSize) {
  auto dev = cudaDevice();
  auto huge = dev->allocate(Index{1} << 50);  // 2^50 doubles = 8 PiB
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(contains(huge.error().message, "out of memory allocating 9007199254740992 bytes"))
      << huge.error().message;
  // Not sticky: the device still works.
  auto after = buildOverflowingAt(dev, 3, -1);
  ASSERT_TRUE(after.ok()) << after.error().message;
}

TEST(CudaMemory, AnOverflowingByteCountIsAnError) {
  auto huge = cudaDevice()->allocate(INT64_MAX / 4);
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(contains(huge.error().message, "overflows")) << huge.error().message;
}

TEST(CudaMemory, ReleasedBlocksAreHandedOutAgain) {
  auto dev = cudaDevice();
  auto first = dev->allocate(12345);
  ASSERT_TRUE(first.ok()) << first.error().message;
  dev->release(*first);
  const std::size_t cached = dev->cachedBytes();
  EXPECT_GE(cached, 12345u * sizeof(Scalar));
  auto second = dev->allocate(12345);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(*second, *first);
  // Blocks are kept by size class (size_class.hpp): the whole rounded block left the cache.
  EXPECT_EQ(dev->cachedBytes(), cached - sizeClass(12345u * sizeof(Scalar)));
  dev->release(*second);
}

// Parts of one block share it: each starts at its offset and holds its length (clamped to the
// block), and the block goes back to the cache only when the last part is gone.
TEST(CudaMemory, PartsOfABlockShareItUntilTheLastIsGone) {
  auto dev = cudaDevice();
  auto raw = dev->allocate(1000);
  ASSERT_TRUE(raw.ok()) << raw.error().message;
  const std::size_t cached = dev->cachedBytes();
  {
    auto whole = std::make_unique<CudaBuffer>(dev, *raw, 1000);
    const CudaBuffer second = whole->part(400, 400), tail = whole->part(900, 400), past = whole->part(2000, 5);
    EXPECT_EQ(second.data(), *raw + 400);
    EXPECT_EQ(second.size(), 400);
    EXPECT_EQ(tail.size(), 100);
    EXPECT_EQ(past.size(), 0);
    whole.reset();
    EXPECT_EQ(dev->cachedBytes(), cached) << "the block went back while parts of it live";
  }
  EXPECT_EQ(dev->cachedBytes(), cached + sizeClass(1000u * sizeof(Scalar)));
}

// A block released while a queued kernel still reads it is handed out again at once; the kernel
// that then writes it is queued behind the reader, so the reader saw the old values.
TEST(CudaMemory, AReusedBlockIsWrittenOnlyAfterItsEarlierReaders) {
  auto dev = cudaDevice();
  ScopedCheckEachLaunch deferred(dev, false);
  const Index n = (Index{1} << 22) + 7;  // large enough that the reader is still queued
  std::vector<CudaBuffer> results;
  for (int round = 0; round < 4; ++round) {
    Scalar* reused = nullptr;
    {
      auto source = buildConstant(dev, n, static_cast<Scalar>(round));
      ASSERT_TRUE(source.ok()) << source.error().message;
      reused = source->data();
      auto sum = mapAdding(*source, 0.5);  // reads source
      ASSERT_TRUE(sum.ok()) << sum.error().message;
      results.push_back(std::move(*sum));
    }  // source released, its reader maybe still queued
    auto overwrite = buildConstant(dev, n, -1.0);
    ASSERT_TRUE(overwrite.ok()) << overwrite.error().message;
    EXPECT_EQ(overwrite->data(), reused) << "the cache did not hand the block out again";
  }
  for (int round = 0; round < 4; ++round) {
    const auto values = download(results[static_cast<std::size_t>(round)]);
    for (std::size_t i = 0; i < values.size(); i += 4099)
      ASSERT_EQ(values[i], static_cast<Scalar>(round) + 0.5) << "round " << round << ", element " << i;
    ASSERT_EQ(values.back(), static_cast<Scalar>(round) + 0.5);
  }
}

TEST(CudaMemory, UploadAndDownloadKeepEveryBitPattern) {
  auto dev = cudaDevice();
  const std::vector<Scalar> values = {0.0, -0.0, 1.0, -1.5, 5e-324, -2.2250738585072014e-308,
                                      1.7976931348623157e308, INFINITY, -INFINITY,
                                      std::bit_cast<Scalar>(std::uint64_t{0x7ff8dead0000beefull}),
                                      std::bit_cast<Scalar>(std::uint64_t{0xfff0000000000001ull})};
  const auto back = download(upload(dev, values));
  EXPECT_TRUE(sameBits(values, back));
  auto one = dev->readOne(upload(dev, values).data() + 9);
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(*one), 0x7ff8dead0000beefull);
}

// ---- matMul: the fma chain, bit for bit -----------------------------------------------------------
//
// The contract (DESIGN.md §4): out[i][j] is acc = +0.0; acc = fma(a[i][k], b[k][j], acc) for k
// ascending. fmaChain below is that definition, written plainly; every product the cuda device
// computes is compared with it bit for bit (NaN against any NaN: the contract fixes every finite
// and infinite result, but a NaN's payload is the hardware's own).

Scalar fmaChain(const Scalar* aRow, const Scalar* bColumn, Index inner) {
  Scalar acc = 0.0;
  for (Index k = 0; k < inner; ++k) acc = std::fma(aRow[k], bColumn[k], acc);
  return acc;
}

bool sameResult(Scalar expected, Scalar actual) {
  return std::bit_cast<std::uint64_t>(expected) == std::bit_cast<std::uint64_t>(actual) ||
         (std::isnan(expected) && std::isnan(actual));
}

// The operands' values, as bit patterns from a hash of (seed, index), so that the device can build
// a large operand in place and the host can recompute any row or column of it: the input regimes
// of the DMMA measurements (docs/EXACTNESS.md), plus one whose every product underflows to -0.0.
enum Regime : int {
  kNarrowExponents,  // ±[1, 2) · 2^(-4 .. 4)
  kWideExponents,    // ±[1, 2) · 2^(-60 .. 60)
  kCancelling,       // ±(1 + a small fraction): sums of terms near ±1 cancel
  kSubnormal,        // ±[1, 2) · 2^(-551 .. -512): products and sums subnormal, some underflowing
  kSpecial,          // ±0 (10%), ±inf (2%), NaN (1%), ±2^(500 .. 519) (9%: products overflow), else wide exponents
  kUnderflowing,     // ±[1, 2) · 2^-600 with the seed's sign: products of opposite signs round to -0.0
  kRegimes
};

OSPREY_FN inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

OSPREY_FN inline Scalar fromBits(std::uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  return std::bit_cast<Scalar>(bits);
#endif
}

// Element i of the operand `seed` names, in `regime`. An odd seed makes kUnderflowing's values
// negative, an even one positive.
OSPREY_FN inline Scalar operandValue(int regime, std::uint64_t seed, Index i) {
  const std::uint64_t h = mix64(mix64(seed) ^ static_cast<std::uint64_t>(i));
  const std::uint64_t sign = (h >> 63) << 63, mantissa = h & ((std::uint64_t{1} << 52) - 1);
  const std::uint64_t pick = (h >> 52) & 0x7ff;
  const auto scaled = [&](int exponent) {
    return fromBits(sign | (static_cast<std::uint64_t>(1023 + exponent) << 52) | mantissa);
  };
  switch (regime) {
    case kNarrowExponents: return scaled(static_cast<int>(pick % 9) - 4);
    case kWideExponents: return scaled(static_cast<int>(pick % 121) - 60);
    case kCancelling: return fromBits(sign | (std::uint64_t{1023} << 52) | (mantissa >> (pick % 50)));
    case kSubnormal: return scaled(-512 - static_cast<int>(pick % 40));
    case kSpecial: {
      const std::uint64_t r = pick % 50;
      if (r < 5) return fromBits(sign);                                 // ±0.0
      if (r == 5) return fromBits(sign | (std::uint64_t{0x7ff} << 52));  // ±inf
      if (r == 6 && pick / 50 % 2 == 0) return fromBits(std::uint64_t{0x7ff8} << 48 | mantissa % 65536);  // NaN
      if (r < 11) return scaled(500 + static_cast<int>((pick / 50) % 20));
      return scaled(static_cast<int>((pick / 50) % 121) - 60);
    }
    default: return fromBits(((seed & 1) << 63) | (std::uint64_t{1023 - 600} << 52) | mantissa);
  }
}

// Built on the device, element by element.
Result<CudaBuffer> deviceOperand(const std::shared_ptr<CudaDevice>& dev, Index n, int regime, std::uint64_t seed) {
  return gpuBuild(dev, n, [=] OSPREY_FN(Index i) -> Scalar { return operandValue(regime, seed, i); });
}

// from[at[i]] for each i: the sampled outputs, gathered on the device before the read-back.
Result<CudaBuffer> gatherOutputs(const CudaBuffer& from, const CudaBuffer& at) {
  const auto values = from.view(), where = at.view();
  return gpuBuild(from.device(), at.size(),
                  [=] OSPREY_FN(Index i) -> Scalar { return values[static_cast<Index>(where[i])]; });
}

struct Product {
  Index batch, rows, inner, cols;
};

std::string describe(Product p, int regime) {
  return fmt::format("{}{} x {} x {}, regime {}", p.batch == 1 ? "" : fmt::format("{} products ", p.batch), p.rows,
                     p.inner, p.cols, regime);
}

// The host's side of a check: which outputs to compare (flattened: z·rows·cols + r·cols + c) and
// the fma chain of each. Every output when the host can afford all the chains (kHostBudget fused
// multiply-adds, the operand lines it keeps at most kHostLines); otherwise a grid of sampled rows x
// sampled columns (the first and last of each, the tilings' edges near both ends, the rest at
// random; all of a short side and as many of the long one as the budget allows) in the first,
// middle and last product, plus every output of the first and last rows and columns where those
// still fit the budget.
constexpr double kHostBudget = 4e7;
constexpr Index kHostLines = 8192;

struct Expected {
  std::vector<Index> at;
  std::vector<Scalar> value;
};

std::vector<Index> sampledLines(Index n, Index want, std::uint64_t seed) {
  if (want >= n) {
    std::vector<Index> all(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
    return all;
  }
  std::vector<Index> lines;
  for (Index edge : {0, 1, 7, 8, 9, 63, 64, 65, 95, 96, 127, 128, 129, 143, 144, 145})
    for (Index at : {edge, n - 1 - edge})
      if (at >= 0 && at < n) lines.push_back(at);
  std::uint64_t state = seed;
  while (static_cast<Index>(lines.size()) < want) lines.push_back(static_cast<Index>((state = mix64(state)) % n));
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  return lines;
}

Expected expectedOutputs(Product p, int regime, std::uint64_t seedA, std::uint64_t seedB) {
  const auto aValue = [&](Index z, Index r, Index k) { return operandValue(regime, seedA, (z * p.rows + r) * p.inner + k); };
  const auto bValue = [&](Index z, Index k, Index c) { return operandValue(regime, seedB, (z * p.inner + k) * p.cols + c); };
  const auto aRow = [&](Index z, Index r, std::vector<Scalar>& into) {
    into.resize(static_cast<std::size_t>(p.inner));
    for (Index k = 0; k < p.inner; ++k) into[static_cast<std::size_t>(k)] = aValue(z, r, k);
  };
  const auto bColumn = [&](Index z, Index c, std::vector<Scalar>& into) {
    into.resize(static_cast<std::size_t>(p.inner));
    for (Index k = 0; k < p.inner; ++k) into[static_cast<std::size_t>(k)] = bValue(z, k, c);
  };
  const double depth = p.inner > 0 ? static_cast<double>(p.inner) : 1.0;
  const bool everything =
      static_cast<double>(p.batch) * static_cast<double>(p.rows) * static_cast<double>(p.cols) * depth <= kHostBudget &&
      p.batch * (p.rows + p.cols) <= kHostLines;
  std::vector<Index> products;
  if (everything) {
    for (Index z = 0; z < p.batch; ++z) products.push_back(z);
  } else {
    products = {0, p.batch / 2, p.batch - 1};
    products.erase(std::unique(products.begin(), products.end()), products.end());
  }
  const double perProduct = kHostBudget / static_cast<double>(products.size());
  const auto side = static_cast<Index>(std::clamp(std::sqrt(perProduct / depth), 8.0, 144.0));
  // A short side (a decoded token's one column) is taken whole, the long one sampled more densely.
  const auto longSide = [&](Index shortSide) {
    return static_cast<Index>(std::clamp(perProduct / (depth * static_cast<double>(std::max<Index>(shortSide, 1))), 8.0,
                                         static_cast<double>(kHostLines)));
  };
  const Index sampledRows = everything ? p.rows : p.cols <= side ? longSide(p.cols) : side;
  const Index sampledCols = everything ? p.cols : p.rows <= side ? longSide(p.rows) : side;
  const bool edges = !everything && 4.0 * static_cast<double>(p.rows + p.cols) * depth <= perProduct;

  Expected e;
  for (Index z : products) {
    const auto rows = sampledLines(p.rows, sampledRows, 11 + static_cast<std::uint64_t>(z));
    const auto cols = sampledLines(p.cols, sampledCols, 97 + static_cast<std::uint64_t>(z));
    std::vector<std::vector<Scalar>> aRows(rows.size()), bColumns(cols.size());
#pragma omp parallel for schedule(dynamic, 4)
    for (std::size_t i = 0; i < rows.size(); ++i) aRow(z, rows[i], aRows[i]);
#pragma omp parallel for schedule(dynamic, 4)
    for (std::size_t j = 0; j < cols.size(); ++j) bColumn(z, cols[j], bColumns[j]);
    // The grid, then (where affordable) the rest of the first and last rows and columns, each
    // with the other operand's line recomputed on the spot.
    struct Output {
      Index r, c;
      const std::vector<Scalar>* row;
      const std::vector<Scalar>* column;
    };
    std::vector<Output> outputs;
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t j = 0; j < cols.size(); ++j) outputs.push_back({rows[i], cols[j], &aRows[i], &bColumns[j]});
    if (edges) {
      const auto inRows = [&](Index r) { return std::binary_search(rows.begin(), rows.end(), r); };
      const auto inCols = [&](Index c) { return std::binary_search(cols.begin(), cols.end(), c); };
      for (std::size_t i : {std::size_t{0}, rows.size() - 1})
        for (Index c = 0; c < p.cols; ++c)
          if (!inCols(c)) outputs.push_back({rows[i], c, &aRows[i], nullptr});
      for (std::size_t j : {std::size_t{0}, cols.size() - 1})
        for (Index r = 0; r < p.rows; ++r)
          if (!inRows(r)) outputs.push_back({r, cols[j], nullptr, &bColumns[j]});
    }
    const std::size_t first = e.at.size();
    e.at.resize(first + outputs.size());
    e.value.resize(first + outputs.size());
#pragma omp parallel for schedule(dynamic, 64)
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      const Output& out = outputs[o];
      std::vector<Scalar> line;  // the line not kept: recomputed for this output alone
      const std::vector<Scalar>* row = out.row;
      const std::vector<Scalar>* column = out.column;
      if (!row) {
        aRow(z, out.r, line);
        row = &line;
      } else if (!column) {
        bColumn(z, out.c, line);
        column = &line;
      }
      e.at[first + o] = (z * p.rows + out.r) * p.cols + out.c;
      e.value[first + o] = fmaChain(row->data(), column->data(), p.inner);
    }
  }
  return e;
}

// The product through the device's own matMul (one product: gpuMatMul; a batch: matMulBatched,
// attention's path), which picks the tiling itself, or launched with the tiling named.
Result<CudaBuffer> productOf(const std::shared_ptr<CudaDevice>& dev, const CudaBuffer& a, const CudaBuffer& b, Product p,
                             ExactTiling tiling) {
  if (tiling == ExactTiling::Chosen && p.batch == 1) return gpuMatMul(a, b, p.rows, p.inner, p.cols);
  auto out = OSPREY_TRY(gpuAllocate(dev, p.batch * p.rows * p.cols));
  if (tiling == ExactTiling::Chosen) {
    OSPREY_CHECK(dev->matMulBatched(out.data(), a.view(), b.view(), p.batch, p.rows, p.inner, p.cols));
    return out;
  }
  OSPREY_CUDA_CHECK(p.batch == 1 ? launchExactMatMul(out.data(), a.data(), b.data(), p.rows, p.inner, p.cols,
                                                     dev->multiprocessors(), dev->stream(), tiling)
                                 : launchExactMatMulBatched(out.data(), a.data(), b.data(), p.batch, p.rows, p.inner,
                                                            p.cols, dev->multiprocessors(), dev->stream(), tiling),
                    "exact matMul launch");
  return out;
}

constexpr ExactTiling kTilings[] = {ExactTiling::Chosen,       ExactTiling::Square128, ExactTiling::Wide128x144,
                                    ExactTiling::Middle128x96, ExactTiling::Small64,   ExactTiling::Square128Deep};

const char* tilingName(ExactTiling tiling) {
  switch (tiling) {
    case ExactTiling::Chosen: return "the device's choice";
    case ExactTiling::Square128: return "128 x 128 tiles";
    case ExactTiling::Wide128x144: return "128 x 144 tiles";
    case ExactTiling::Middle128x96: return "128 x 96 tiles";
    case ExactTiling::Small64: return "64 x 64 tiles";
    case ExactTiling::Square128Deep: return "128 x 128 tiles, 32-deep slices";
  }
  return "?";
}

// Builds both operands on the device, multiplies them under the device's choice of tiling and
// under each tiling by name, and compares the outputs expectedOutputs picks with their chains.
void checkProduct(const std::shared_ptr<CudaDevice>& dev, Product p, int regime, std::uint64_t seed) {
  SCOPED_TRACE(describe(p, regime));
  const std::uint64_t seedA = 2 * seed + 1, seedB = 2 * seed + 2;  // odd: a's kUnderflowing values are negative
  auto a = deviceOperand(dev, p.batch * p.rows * p.inner, regime, seedA);
  auto b = deviceOperand(dev, p.batch * p.inner * p.cols, regime, seedB);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.error().message : a.error().message);
  const Expected expected = expectedOutputs(p, regime, seedA, seedB);
  const std::vector<Scalar> at(expected.at.begin(), expected.at.end());
  const CudaBuffer where = upload(dev, at);
  for (ExactTiling tiling : kTilings) {
    SCOPED_TRACE(tilingName(tiling));
    auto product = productOf(dev, *a, *b, p, tiling);
    ASSERT_TRUE(product.ok()) << product.error().message;
    auto gathered = gatherOutputs(*product, where);
    ASSERT_TRUE(gathered.ok()) << gathered.error().message;
    const auto actual = download(*gathered);
    ASSERT_EQ(actual.size(), expected.value.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < actual.size(); ++i) {
      if (sameResult(expected.value[i], actual[i])) continue;
      if (++wrong <= 3) {
        const Index flat = expected.at[i], z = flat / (p.rows * p.cols), r = flat / p.cols % p.rows, c = flat % p.cols;
        ADD_FAILURE() << fmt::format(
            "output ({}, {}) of product {}: the fma chain gives {:a} (0x{:016x}), cuda {:a} (0x{:016x})", r, c, z,
            expected.value[i], std::bit_cast<std::uint64_t>(expected.value[i]), actual[i],
            std::bit_cast<std::uint64_t>(actual[i]));
      }
    }
    ASSERT_EQ(wrong, 0u) << "of " << actual.size() << " outputs compared";
  }
}

// Around every kernel's edges: the tensor-core tilings (64 x 64, 128 x 96, 128 x 128 and 128 x 144
// output tiles; k in slices of 16 or 32, four per DMMA, the rest of the last slice added one fma
// at a time; odd inner or cols take the 8-byte copies), the few-rows kernel (rows <= 8: 64-column
// blocks, 16-deep slices) and the few-columns kernel (cols <= 8 and fewer than the rows: 4-row
// blocks with 256-deep stages, 16-row blocks with 64-deep stages from 16384 rows), empty products
// and inner 0 and 1.
constexpr Product kEdgeShapes[] = {
    {1, 1, 1, 1},      {1, 2, 3, 4},       {1, 7, 13, 5},      {1, 8, 8, 8},      {1, 9, 9, 9},      {1, 9, 1, 9},
    {1, 17, 2, 31},    {1, 33, 3, 65},     {1, 63, 7, 65},     {1, 64, 64, 64},   {1, 65, 65, 65},   {1, 127, 9, 129},
    {1, 128, 8, 128},  {1, 129, 17, 127},  {1, 200, 1, 300},   {1, 64, 768, 771}, {1, 257, 255, 33}, {1, 31, 2, 1025},
    {1, 143, 15, 145}, {1, 144, 16, 144},  {1, 145, 18, 143},  {1, 97, 31, 289},  {1, 131, 33, 97},  {1, 96, 12, 96},
    {1, 1536, 24, 1550}, {1, 1700, 37, 1410}, {1, 2048, 9, 1200}, {1, 0, 5, 3},  {1, 4, 0, 6},       {1, 70, 0, 70},
    {1, 5, 6, 0},      {1, 0, 0, 0},       {1, 13, 1, 11},     {1, 11, 4, 13},    {1, 521, 19, 263},
    // few rows
    {1, 8, 97, 65},    {1, 6, 33, 31},     {1, 1, 31, 33},     {1, 2, 64, 32},    {1, 1, 3072, 768}, {1, 3, 17, 64},
    {1, 4, 16, 65},    {1, 5, 15, 129},    {1, 7, 48, 127},    {1, 1, 1, 200},
    // few columns
    {1, 8, 1, 1},      {1, 2, 5, 1},       {1, 33, 31, 1},     {1, 32, 32, 2},    {1, 65, 33, 3},    {1, 64, 64, 4},
    {1, 31, 65, 5},    {1, 100, 7, 6},     {1, 97, 95, 7},     {1, 129, 96, 8},   {1, 9, 33, 8},     {1, 1000, 0, 3},
    {1, 50, 1, 8},     {1, 5, 257, 1},     {1, 6, 511, 1},     {1, 7, 1023, 2},   {1, 9, 2049, 1},   {1, 13, 255, 8},
    {1, 16385, 65, 1}, {1, 16400, 63, 3},  {1, 16387, 129, 1},
    // batches: tensor-core tilings (grid z) and the small kernels product by product
    {3, 65, 17, 33},   {5, 9, 4, 130},     {2, 129, 1, 145},   {4, 5, 9, 7},      {4, 20, 9, 3},     {7, 64, 0, 64},
};

TEST(CudaMatMul, MatchesTheFmaChainOnEveryTileEdge) {
  auto dev = cudaDevice();
  std::uint64_t seed = 900;
  for (Product p : kEdgeShapes)
    for (int regime : {kNarrowExponents, kWideExponents}) checkProduct(dev, p, regime, seed++);
}

// The probe's input regimes on shapes of each kernel, the tensor-core ones with full and partial
// slices and DMMA steps, one column with a partial group of rows and a k tail.
TEST(CudaMatMul, MatchesTheFmaChainInEveryInputRegime) {
  auto dev = cudaDevice();
  constexpr Product kShapes[] = {{1, 64, 4, 64},    {1, 33, 17, 70},  {1, 128, 256, 128}, {1, 129, 31, 127},
                                 {1, 257, 1023, 145}, {1, 70, 3, 70}, {1, 300, 100, 1},   {1, 1, 100, 300},
                                 {1, 9, 33, 8},     {1, 5, 7, 3},     {1, 8, 8, 8},       {1, 200, 1, 300},
                                 {2, 96, 50, 100},  {1, 1030, 768, 2},  {1, 3, 766, 1030}, {1, 77, 771, 1},
                                 {1, 2304, 768, 1}};
  std::uint64_t seed = 5000;
  for (int regime = 0; regime < kRegimes; ++regime)
    for (Product p : kShapes) checkProduct(dev, p, regime, seed++);
}

// A chain that underflows to -0.0 ends at -0.0: no padding term (fma(0, 0, -0.0) = +0.0) may enter
// it, whatever inner % 4 and inner % 16 are. With no terms at all the output is +0.0.
TEST(CudaMatMul, AnUnderflowedChainKeepsItsNegativeZero) {
  auto dev = cudaDevice();
  for (Index inner : {0, 1, 2, 3, 4, 5, 7, 9, 15, 16, 17, 31, 33}) {
    for (Product p : {Product{1, 70, inner, 70}, Product{1, 129, inner, 146}, Product{1, 3, inner, 40},
                      Product{1, 40, inner, 3}}) {
      SCOPED_TRACE(describe(p, kUnderflowing));
      auto a = deviceOperand(dev, p.rows * p.inner, kUnderflowing, 1);
      auto b = deviceOperand(dev, p.inner * p.cols, kUnderflowing, 2);
      ASSERT_TRUE(a.ok() && b.ok());
      auto product = gpuMatMul(*a, *b, p.rows, p.inner, p.cols);
      ASSERT_TRUE(product.ok()) << product.error().message;
      const std::uint64_t expected = inner == 0 ? 0 : 0x8000000000000000ull;
      const auto values = download(*product);
      for (std::size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint64_t>(values[i]), expected) << "output " << i;
    }
  }
}

// The operand scan in front of each cuBLASLt product (src/gpu/cuda/exact_lt.cu) must find a single
// tiny value wherever it sits: the first or last element of either operand, an odd last element
// after the pairs it reads 16 bytes at a time, an operand that starts off a 16-byte boundary. Each
// case holds exactly one value below 2^-250 (-2^-1074 times 0.25 underflows to -0.0), placed as the
// last term of one output's chain, every other term zero: that output is -0.0 on the fma chain and
// would be +0.0 on cuBLASLt had the scan missed it (CudaMatMul.AnUnderflowedChainKeepsItsNegativeZero
// shows the difference). Shapes that run on the own kernel are reported and checked all the same.
TEST(CudaMatMul, TheOperandScanFindsOneTinyValueAnywhere) {
  auto dev = cudaDevice();
  constexpr Scalar kTiny = -0x1p-1074, kQuarter = 0.25;
  struct Case {
    Index rows, inner, cols;
    Index offset;     // the operands start this many doubles into their buffers
    bool inA;         // the tiny value is in a (at a[i][inner - 1]) or in b (at b[inner - 1][j])
    Index i, j;       // the output whose chain ends at -0.0
  };
  const Case cases[] = {
      {1024, 768, 2304, 0, false, 0, 2303},    // b's last element
      {1024, 768, 2304, 0, true, 1023, 5},     // a's last element
      {1024, 768, 2304, 0, false, 17, 0},      // b's first element of its last row
      {1024, 1, 2304, 0, true, 0, 0},          // a's first element
      {1023, 767, 2303, 0, false, 3, 2302},    // odd lengths: b's odd last element
      {1023, 767, 2303, 0, true, 1022, 9},     // a's odd last element
      {1024, 768, 2304, 1, true, 0, 7},        // operands off a 16-byte boundary: a's first element
      {1024, 768, 2304, 1, false, 511, 2303},  // and b's last
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} x {} x {}, offset {}, tiny in {}, output ({}, {})", c.rows, c.inner, c.cols, c.offset,
                             c.inA ? "a" : "b", c.i, c.j));
    std::vector<Scalar> a(static_cast<std::size_t>(c.offset + c.rows * c.inner), 0.0);
    std::vector<Scalar> b(static_cast<std::size_t>(c.offset + c.inner * c.cols), 0.0);
    const Index k = c.inner - 1;
    a[static_cast<std::size_t>(c.offset + c.i * c.inner + k)] = c.inA ? kTiny : kQuarter;
    b[static_cast<std::size_t>(c.offset + k * c.cols + c.j)] = c.inA ? kQuarter : kTiny;
    const CudaBuffer aAll = upload(dev, a), bAll = upload(dev, b);
    const ExactLtTally before = exactLtTally();
    auto product = gpuMatMul(aAll.part(c.offset, c.rows * c.inner), bAll.part(c.offset, c.inner * c.cols), c.rows,
                             c.inner, c.cols);
    ASSERT_TRUE(product.ok()) << product.error().message;
    const ExactLtTally after = exactLtTally();
    if (after.onLt + after.onOwn > before.onLt + before.onOwn)
      std::printf("[ path     ] %lld x %lld x %lld (offset %lld): %s\n", static_cast<long long>(c.rows),
                  static_cast<long long>(c.inner), static_cast<long long>(c.cols), static_cast<long long>(c.offset),
                  after.onLt > before.onLt ? "cuBLASLt" : "own kernel");
    const auto values = download(*product);
    for (Index i = 0; i < c.rows; ++i)
      for (Index j = 0; j < c.cols; ++j) {
        const std::uint64_t want = i == c.i && j == c.j ? 0x8000000000000000ull : 0;
        ASSERT_EQ(std::bit_cast<std::uint64_t>(values[static_cast<std::size_t>(i * c.cols + j)]), want)
            << "output (" << i << ", " << j << ")";
      }
  }
}

// x (rows, cols) copied as (cols, rows), element by element.
Result<CudaBuffer> transposedCopy(const CudaBuffer& x, Index rows, Index cols) {
  const auto from = x.view();
  return gpuBuild(x.device(), rows * cols, [=] OSPREY_FN(Index o) -> Scalar {
    return from[(o % rows) * cols + o / rows];  // copy[c][r] = x[r][c]
  });
}

// Products with one operand held transposed (osprey/transposed.hpp; the handler's matMulTransposed,
// which the linear layers' backward and the tied lm head use on this device) give the bits of the
// product of the transposed copies, which the tests above hold to the fma chain. Every such shape
// of GPT-2 124M's training step at B4 T1024, in turn through the probe's regimes, and small and
// odd shapes that take the few-rows and few-columns kernels or ragged tiles.
TEST(CudaMatMul, OperandsHeldTransposedGiveTheCopiesBits) {
  auto dev = cudaDevice();
  GpuCuda h(dev);
  constexpr Index N = 4096, C = 768, V = 50257;
  struct Held {
    Product p;
    Transposed layout;
  };
  const Held shapes[] = {
      // dx = dout · wᵀ, w held (IC, OC): (N, OC, IC)
      {{1, N, 3 * C, C}, Transposed::B}, {{1, N, C, C}, Transposed::B}, {{1, N, 4 * C, C}, Transposed::B},
      {{1, N, C, 4 * C}, Transposed::B},
      // dw = xᵀ · dout, x held (N, IC): (IC, N, OC)
      {{1, C, N, 3 * C}, Transposed::A}, {{1, C, N, C}, Transposed::A}, {{1, C, N, 4 * C}, Transposed::A},
      {{1, 4 * C, N, C}, Transposed::A},
      // the lm head: logits = x · wteᵀ (N, C, V), dwte = doutᵀ · x (V, N, C)
      {{1, N, C, V}, Transposed::B}, {{1, V, N, C}, Transposed::A},
      // a prompt's lm head and small or ragged shapes (few rows, few columns, partial tiles)
      {{1, 5, C, V}, Transposed::B}, {{1, 3, 17, 40}, Transposed::A}, {{1, 40, 17, 3}, Transposed::B},
      {{1, 129, 33, 146}, Transposed::A}, {{1, 129, 33, 146}, Transposed::B}, {{1, 70, 1, 70}, Transposed::B},
  };
  std::uint64_t seed = 9100;
  for (const Held& s : shapes) {
    const Product p = s.p;
    const int regime = static_cast<int>(seed % kRegimes);
    SCOPED_TRACE(describe(p, regime) + (s.layout == Transposed::A ? ", a held transposed" : ", b held transposed"));
    auto a = deviceOperand(dev, p.rows * p.inner, regime, 2 * seed + 1);
    auto b = deviceOperand(dev, p.inner * p.cols, regime, 2 * seed + 2);
    ++seed;
    ASSERT_TRUE(a.ok() && b.ok());
    auto want = gpuMatMul(*a, *b, p.rows, p.inner, p.cols);
    ASSERT_TRUE(want.ok()) << want.error().message;
    // The held operand: a as (inner, rows) or b as (cols, inner).
    const bool aHeld = s.layout == Transposed::A;
    const Index heldRows = aHeld ? p.rows : p.inner, heldCols = aHeld ? p.inner : p.cols;
    auto held = transposedCopy(aHeld ? *a : *b, heldRows, heldCols);
    ASSERT_TRUE(held.ok());
    auto got = h.matMulTransposed(aHeld ? *held : *a, aHeld ? *b : *held, p.rows, p.inner, p.cols, s.layout);
    ASSERT_TRUE(got.ok()) << got.error().message;
    const auto expected = download(*want), actual = download(*got);
    ASSERT_EQ(actual.size(), expected.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < actual.size(); ++i)
      if (!sameResult(expected[i], actual[i]) && ++wrong <= 3)
        ADD_FAILURE() << fmt::format("output ({}, {}): the copies' product {:a}, held {:a}", i / p.cols, i % p.cols,
                                     expected[i], actual[i]);
    ASSERT_EQ(wrong, 0u) << "of " << actual.size() << " outputs";
  }
}

// Every product GPT-2 124M's training step makes at B4 T1024 (N = 4096 rows, C = 768, V = 50257;
// gpt2/layers/matmul.hpp): the linear layers' x·w (N, IC, OC), their backward's w·doutᵀ (IC, OC, N)
// and xᵀ·dout (IC, N, OC); the tied lm head's wt·xᵀ (V, C, N), dout·wt (N, V, C) and doutᵀ·x
// (V, N, C); the bias gradients, ones (1, N) times dout (1, N, OC); and one sequence's qkv product
// (T = 1024).
TEST(CudaMatMul, MatchesTheFmaChainOnGptTwoTrainingProducts) {
  auto dev = cudaDevice();
  constexpr Index N = 4096, C = 768, V = 50257;
  constexpr Product kShapes[] = {
      {1, N, C, 3 * C}, {1, N, C, C}, {1, N, C, 4 * C}, {1, N, 4 * C, C},             // forward
      {1, C, 3 * C, N}, {1, C, C, N}, {1, C, 4 * C, N}, {1, 4 * C, C, N},             // dx, transposed
      {1, C, N, 3 * C}, {1, C, N, C}, {1, C, N, 4 * C}, {1, 4 * C, N, C},             // dw
      {1, V, C, N},     {1, N, V, C}, {1, V, N, C},                                   // the lm head
      {1, 1, N, 3 * C}, {1, 1, N, C}, {1, 1, N, 4 * C},                               // bias gradients
      {1, 1024, C, 3 * C},
  };
  std::uint64_t seed = 7000;
  for (Product p : kShapes) checkProduct(dev, p, seed % 2 == 0 ? kWideExponents : kNarrowExponents, seed++);
}

// Attention's per-head products, all heads of B4 T1024 (48 of them) in one batch each
// (gpt2/layers/attention.hpp): scores q·kᵀ (T, hs, T), att·v and dq (T, T, hs), and dkᵀ, dvᵀ
// (hs, T, T).
TEST(CudaMatMul, MatchesTheFmaChainOnGptTwoAttentionBatches) {
  auto dev = cudaDevice();
  checkProduct(dev, {48, 1024, 64, 1024}, kWideExponents, 8000);
  checkProduct(dev, {48, 1024, 1024, 64}, kNarrowExponents, 8001);
  checkProduct(dev, {48, 64, 1024, 1024}, kCancelling, 8004);
  checkProduct(dev, {12, 37, 64, 37}, kWideExponents, 8002);   // a prompt's heads (T = 37)
  checkProduct(dev, {12, 5, 5, 64}, kWideExponents, 8003);     // T = 5: the few-rows kernel, head by head
}

// Generation: one decoded token's products (weightᵀ·x as (OC, IC, 1), the lm head among them; and
// the row-vector form 1 x IC x OC), and a prompt's N tokens (5 .. 64) through each path.
TEST(CudaMatMul, MatchesTheFmaChainOnGptTwoPromptAndDecodeProducts) {
  auto dev = cudaDevice();
  constexpr Index C = 768, V = 50257;
  std::vector<Product> shapes = {{1, 3 * C, C, 1}, {1, C, C, 1},     {1, 4 * C, C, 1}, {1, C, 4 * C, 1},
                                 {1, V, C, 1},     {1, 1, C, 3 * C}, {1, 1, C, V},     {1, 1, 4 * C, C}};
  for (Index n : {5, 8, 9, 17, 64}) {
    shapes.push_back({1, 3 * C, C, n});
    shapes.push_back({1, C, 4 * C, n});
    shapes.push_back({1, V, C, n});
    shapes.push_back({1, n, C, 3 * C});
  }
  std::uint64_t seed = 9000;
  for (Product p : shapes) checkProduct(dev, p, seed % 2 == 0 ? kWideExponents : kCancelling, seed++);
}

// Overflow to infinity, signed zeros and subnormals in rows of their own.
TEST(CudaMatMul, MatchesTheFmaChainWithInfinitiesZerosAndSubnormals) {
  auto dev = cudaDevice();
  const Product p{1, 33, 19, 70};
  std::vector<Scalar> a(static_cast<std::size_t>(p.rows * p.inner)), b(static_cast<std::size_t>(p.inner * p.cols));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = operandValue(kWideExponents, 5, static_cast<Index>(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = operandValue(kWideExponents, 6, static_cast<Index>(i));
  for (Index k = 0; k < p.inner; ++k) a[static_cast<std::size_t>(k)] = 1e308;                // row 0 ...
  for (Index k = 0; k < p.inner; ++k) b[static_cast<std::size_t>(k * p.cols)] = 1.0;         // ... times column 0 overflows
  for (Index k = 0; k < p.inner; ++k) a[static_cast<std::size_t>(p.inner + k)] = -0.0;       // row 1: all -0.0
  for (Index k = 0; k < p.inner; ++k) a[static_cast<std::size_t>(2 * p.inner + k)] = 3e-310;  // row 2: subnormal
  auto product = gpuMatMul(upload(dev, a), upload(dev, b), p.rows, p.inner, p.cols);
  ASSERT_TRUE(product.ok()) << product.error().message;
  const auto actual = download(*product);
  std::vector<Scalar> column(static_cast<std::size_t>(p.inner));
  for (Index r = 0; r < p.rows; ++r)
    for (Index c = 0; c < p.cols; ++c) {
      for (Index k = 0; k < p.inner; ++k) column[static_cast<std::size_t>(k)] = b[static_cast<std::size_t>(k * p.cols + c)];
      const Scalar expected = fmaChain(a.data() + r * p.inner, column.data(), p.inner);
      ASSERT_TRUE(sameResult(expected, actual[static_cast<std::size_t>(r * p.cols + c)]))
          << "output (" << r << ", " << c << "): " << expected << " vs " << actual[static_cast<std::size_t>(r * p.cols + c)];
    }
  EXPECT_TRUE(std::isinf(actual[0]));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(actual[static_cast<std::size_t>(p.cols)]), 0u);  // +0.0: the chain starts at +0.0
}

// The guard of the cuBLASLt path (osprey/gpu/cuda/exact_lt.hpp): an FP64 algorithm the heuristic
// offers for a training shape, set to split k in 4 (split-K) is refused with an error saying why;
// the same algorithm with split-K 1 and no reduction scheme passes. (Every algorithm that passes
// is further checked bit for bit against the own kernel before it runs a shape: the products
// above ran through that choice.)
TEST(CudaMatMul, AnAlgorithmThatSplitsKIsRefused) {
  (void)cudaDevice();
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_64F, CUDA_R_64F), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_64F, 768, 768, 768), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, desc, layout, layout, layout, layout, preference, 1, &found, &count),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(count, 1);
  cublasLtMatmulAlgo_t algo = found.algo;
  std::uint32_t splits = 1, scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  ASSERT_EQ(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(checkKeepsKWhole(algo).ok()) << checkKeepsKWhole(algo).error().message;
  splits = 4;
  ASSERT_EQ(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits)),
            CUBLAS_STATUS_SUCCESS);
  const auto refused = checkKeepsKWhole(algo);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("splits k into 4 parts"), std::string::npos) << refused.error().message;
  const ExactLtTally tally = exactLtTally();
  std::printf("[ exact lt ] shapes on cuBLASLt %d, on the own kernel %d; candidates refused for a bit difference %d\n",
              tally.onLt, tally.onOwn, tally.refused);
  (void)cublasLtMatmulPreferenceDestroy(preference);
  (void)cublasLtMatrixLayoutDestroy(layout);
  (void)cublasLtMatmulDescDestroy(desc);
  (void)cublasLtDestroy(lt);
}

TEST(CudaMatMul, AShapeMismatchIsAnError) {
  auto dev = cudaDevice();
  auto product = gpuMatMul(upload(dev, {1, 2, 3}), upload(dev, {1, 2, 3, 4}), 2, 2, 2);
  EXPECT_FALSE(product.ok());
}

// ---- fold and indexOf ---------------------------------------------------------------------------

TEST(CudaFold, KeepsElementOrder) {
  auto dev = cudaDevice();
  // 1e16 + 1 rounds back to 1e16: any regrouping of this sum gives another answer.
  std::vector<Scalar> values;
  for (int i = 0; i < 5000; ++i) values.insert(values.end(), {1e16, 1.0, -1e16, 1.0});
  Scalar expected = 0.5;
  for (Scalar v : values) expected = expected + v;
  auto folded = foldPlain(upload(dev, values), 0.5);
  ASSERT_TRUE(folded.ok()) << folded.error().message;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(*folded), std::bit_cast<std::uint64_t>(expected)) << *folded << " vs " << expected;

  const auto randoms = randomValues(100003, 42, -5.0, 5.0);
  Scalar halved = 1.25;
  for (Scalar v : randoms) halved = halved * 0.5 + v;
  auto folded2 = foldHalving(upload(dev, randoms), 1.25);
  ASSERT_TRUE(folded2.ok()) << folded2.error().message;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(*folded2), std::bit_cast<std::uint64_t>(halved));
}

// The fold streams its input in chunks of 2048 elements: sizes around the chunk edges.
TEST(CudaFold, KeepsElementOrderAcrossChunkEdges) {
  auto dev = cudaDevice();
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{255}, std::size_t{257}, std::size_t{2047},
                        std::size_t{2048}, std::size_t{2049}, std::size_t{4095}, std::size_t{4096},
                        std::size_t{4097}, std::size_t{6145}}) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    const auto values = randomValues(n, 1000 + n, -3.0, 3.0);
    Scalar expected = -0.75;
    for (Scalar v : values) expected = expected * 0.5 + v;
    auto folded = foldHalving(upload(dev, values), -0.75);
    ASSERT_TRUE(folded.ok()) << folded.error().message;
    EXPECT_EQ(std::bit_cast<std::uint64_t>(*folded), std::bit_cast<std::uint64_t>(expected)) << *folded << " vs " << expected;
  }
}

TEST(CudaFold, FoldOfNothingIsTheSeed) {
  auto dev = cudaDevice();
  auto empty = gpuAllocate(dev, 0);
  ASSERT_TRUE(empty.ok());
  auto folded = foldPlain(*empty, -7.25);
  ASSERT_TRUE(folded.ok()) << folded.error().message;
  EXPECT_EQ(*folded, -7.25);
}

TEST(CudaIndexOf, TheSmallestHitWinsAcrossTheWholeGrid) {
  auto dev = cudaDevice();
  const Index n = 3000001;
  std::vector<Scalar> values(static_cast<std::size_t>(n), 1.0);
  const auto x = upload(dev, values);
  auto none = dev->indexOf(x.view(), 2.0);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(*none, n);

  for (Index hit : {Index{2999999}, Index{1234568}, Index{1234567}}) values[static_cast<std::size_t>(hit)] = 2.0;
  auto found = dev->indexOf(upload(dev, values).view(), 2.0);
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(*found, 1234567);

  values[0] = 2.0;
  auto first = dev->indexOf(upload(dev, values).view(), 2.0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 0);

  std::vector<Scalar> lastOnly(static_cast<std::size_t>(n), 1.0);
  lastOnly.back() = 3.0;
  auto last = dev->indexOf(upload(dev, lastOnly).view(), 3.0);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, n - 1);
}

TEST(CudaIndexOf, UsesIeeeEquality) {
  auto dev = cudaDevice();
  const auto x = upload(dev, {1.0, NAN, -0.0, 0.0, 2.0});
  EXPECT_EQ(*dev->indexOf(x.view(), NAN), 5);   // NaN equals nothing
  EXPECT_EQ(*dev->indexOf(x.view(), 0.0), 2);   // -0.0 == 0.0
  EXPECT_EQ(*dev->indexOf(x.view(), 2.0), 4);
}

// ---- forEach ------------------------------------------------------------------------------------

TEST(CudaForEach, CoversEveryIndexOfALargeGrid) {
  auto dev = cudaDevice();
  const Index n = (Index{1} << 24) + 3;  // more indices than threads: the grid-stride loop wraps
  auto iota = gpuIota(dev, n);
  ASSERT_TRUE(iota.ok()) << iota.error().message;
  const auto values = download(*iota);
  for (Index i = 0; i < n; ++i) ASSERT_EQ(values[static_cast<std::size_t>(i)], static_cast<Scalar>(i)) << i;
}

TEST(CudaForEach, NothingToDoIsNotALaunch) {
  auto empty = gpuIota(cudaDevice(), 0);
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_EQ(empty->size(), 0);
}

// ---- the checked-call macro's words -------------------------------------------------------------

Result<void> failingCall() {
  OSPREY_CUDA_CHECK(cudaErrorInvalidConfiguration, "forEach<Example> launch");
  return {};
}

TEST(CudaCheck, AFailedCallNamesTheCallTheContextTheErrorAndWhatToDo) {
  auto failed = failingCall();
  ASSERT_FALSE(failed.ok());
  const std::string& message = failed.error().message;
  EXPECT_TRUE(contains(message, "forEach<Example> launch")) << message;
  EXPECT_TRUE(contains(message, "cudaErrorInvalidConfiguration")) << message;
  EXPECT_TRUE(contains(message, "tests/cuda/cuda_device_test.cu:")) << message;
  EXPECT_TRUE(contains(message, "launch parameters")) << message;
  EXPECT_TRUE(cuda::isSticky(cudaErrorIllegalAddress));
  EXPECT_TRUE(contains(std::string(cuda::hintFor(cudaErrorIllegalAddress)), "unusable"));
}

}  // namespace
}  // namespace osprey::testing

namespace {
__global__ void spinKernel(double* out, int rounds) {
  double x = threadIdx.x;
  for (int i = 0; i < rounds; ++i) x = x * 0.999 + 1.0;
  out[threadIdx.x] = x;
}
}  // namespace

// OSPREY_CUDA_KERNEL_TIMES: each bracketed launch is counted under its label with a time that is
// its own (a long kernel's several times a short one's), and the file's first line is the total.
TEST(CudaKernelClock, WritesEachLabelsLaunchesAndTime) {
  const std::string file = ::testing::TempDir() + "osprey-kernel-times.tsv";
  ASSERT_EQ(setenv("OSPREY_CUDA_KERNEL_TIMES", file.c_str(), 1), 0);
  double* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 32 * sizeof(double)), cudaSuccess);
  {
    osprey::cuda_detail::KernelClock clock;
    unsetenv("OSPREY_CUDA_KERNEL_TIMES");
    ASSERT_TRUE(clock.on());
    for (int i = 0; i < 3; ++i) {
      const auto timed = clock.time(nullptr, [] { return std::string("short"); });
      spinKernel<<<1, 32>>>(out, 1000);
    }
    {
      const auto timed = clock.time(nullptr, [] { return std::string("long"); });
      spinKernel<<<1, 32>>>(out, 2000000);
    }
    clock.report();
  }
  ASSERT_EQ(cudaFree(out), cudaSuccess);
  std::FILE* in = std::fopen(file.c_str(), "r");
  ASSERT_NE(in, nullptr);
  double busy = 0, longMs = 0, shortMs = 0;
  long long all = 0, longCount = 0, shortCount = 0;
  char label[256];
  ASSERT_EQ(std::fscanf(in, "%lf\t%lld\t%255[^\n]\n", &busy, &all, label), 3);
  EXPECT_NE(std::string(label).find("busy total"), std::string::npos) << label;
  ASSERT_EQ(std::fscanf(in, "%lf\t%lld\t%255[^\n]\n", &longMs, &longCount, label), 3);
  EXPECT_STREQ(label, "long");
  ASSERT_EQ(std::fscanf(in, "%lf\t%lld\t%255[^\n]\n", &shortMs, &shortCount, label), 3);
  EXPECT_STREQ(label, "short");
  std::fclose(in);
  EXPECT_EQ(all, 4);
  EXPECT_EQ(longCount, 1);
  EXPECT_EQ(shortCount, 3);
  EXPECT_GT(longMs, 10 * shortMs);
  // The file prints each figure to 0.001 ms: three roundings of up to 0.0005 each.
  EXPECT_NEAR(busy, longMs + shortMs, 1.5e-3 + 1e-9);
}
