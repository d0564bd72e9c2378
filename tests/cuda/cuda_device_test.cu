// The cuda device runtime's own promises, beyond the typed effect tests: no fallback, a strict
// fault inside a kernel returned with its operands (by the launch itself when every launch is
// checked; otherwise by the next read-back, naming the kernel that faulted first), out-of-memory
// naming the size, cached blocks reused safely without a synchronisation, the exact matMul
// bit-identical to the host device on shapes around every tile edge of every kernel, fold in
// element order across its chunks, indexOf's smallest hit.
//
// Kernels live in the named functions below (an nvcc extended lambda may not be defined inside a
// gtest body, which is a private member function).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "handlers.hpp"
#include "osprey/gpu/cuda_handler.hpp"
#include "osprey/gpu/host.hpp"
#include "osprey/gpu/size_class.hpp"
#include "osprey/gpu/surface.hpp"
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

// ---- matMul: bit-identical to the host device -------------------------------------------------

struct Shape {
  Index rows, inner, cols;
};

// Around every tiling's edges (32 x 32, 64 x 64 and 128 x 128 tiles, 8-deep k slices, 2, 4 and 8
// outputs per thread in each direction; the few-rows kernel's 64-column blocks and 16-deep slices,
// with 1 to 8 rows; the few-columns kernel's 4-row blocks with 256-deep stages and, from 16384
// rows, 16-row blocks with 64-deep stages, with 1 to 8 columns), empty products, and a few with
// enough 128-tiles to take the large tiling on any GPU up to 132 multiprocessors.
constexpr Shape kShapes[] = {
    {1, 1, 1},     {2, 3, 4},      {7, 13, 5},     {8, 8, 8},       {9, 9, 9},       {1, 768, 2304},
    {3, 1000, 5},  {63, 7, 65},    {64, 64, 64},   {65, 65, 65},    {127, 9, 129},   {128, 8, 128},
    {129, 17, 127}, {200, 1, 300}, {64, 768, 771}, {257, 255, 33},  {31, 2, 1025},   {1536, 24, 1550},
    {1700, 37, 1410}, {2048, 9, 1200}, {0, 5, 3},  {4, 0, 6},       {5, 6, 0},       {0, 0, 0},
    // few rows (rows <= 8: 64 columns per block, 16-deep k slices)
    {8, 97, 65},   {6, 33, 31},    {1, 31, 33},    {2, 64, 32},     {1, 3072, 768},  {3, 17, 64},
    {4, 16, 65},   {5, 15, 129},   {7, 48, 127},   {1, 1, 200},
    // few columns (cols <= 8 and fewer than the rows: 32 rows per block, 32-deep k slices), the
    // shape of one-token decoding (weightᵀ times a column)
    {8, 1, 1},     {2, 5, 1},      {33, 31, 1},    {32, 32, 2},     {65, 33, 3},     {64, 64, 4},
    {31, 65, 5},   {100, 7, 6},    {97, 95, 7},    {129, 96, 8},    {9, 33, 8},      {768, 3072, 1},
    {2304, 768, 1}, {3072, 768, 2}, {1000, 0, 3},  {50, 1, 8},
    // few columns: partial 4-row blocks and partial 256-deep stages; the 16-row tall path
    {5, 257, 1},   {6, 511, 1},    {7, 1023, 2},   {9, 2049, 1},    {13, 255, 8},    {16385, 65, 1},
    {16400, 63, 3}, {16387, 129, 1},
    // an attention head's products: T x T x hs (32 x 32 tiles) and T x hs x T (64 x 64); small 32 x 32
    {1024, 1024, 64}, {1024, 64, 1024}, {33, 100, 31},  {97, 3, 65},
    // 64 x 64 tiles with partial edges (too few 128-tiles, enough 64-tiles)
    {520, 33, 600}, {700, 65, 450},
};

// Wide dynamic range, so a product summed in another order, or a fused multiply-add, shows.
std::vector<Scalar> matrixValues(Index n, std::uint64_t seed) {
  auto values = randomValues(static_cast<std::size_t>(n), seed, -1.0, 1.0);
  for (std::size_t i = 0; i < values.size(); i += 3) values[i] *= 1e8;
  for (std::size_t i = 1; i < values.size(); i += 7) values[i] *= 1e-9;
  return values;
}

std::vector<Scalar> hostProduct(const std::vector<Scalar>& a, const std::vector<Scalar>& b, Shape s) {
  std::vector<Scalar> out(static_cast<std::size_t>(s.rows * s.cols), -1.0);
  hostMatMul(out.data(), a.data(), b.data(), s.rows, s.inner, s.cols);
  return out;
}

std::vector<Scalar> cudaProduct(const std::shared_ptr<CudaDevice>& dev, const std::vector<Scalar>& a,
                                const std::vector<Scalar>& b, Shape s) {
  auto product = gpuMatMul(upload(dev, a), upload(dev, b), s.rows, s.inner, s.cols);
  if (!product.ok()) throw std::runtime_error(product.error().message);
  return download(*product);
}

TEST(CudaMatMul, BitIdenticalToTheHostDeviceOnEveryTileEdge) {
  auto dev = cudaDevice();
  std::uint64_t seed = 900;
  for (Shape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.inner << " x " << s.cols);
    const auto a = matrixValues(s.rows * s.inner, seed++);
    const auto b = matrixValues(s.inner * s.cols, seed++);
    const auto expected = hostProduct(a, b, s);
    const auto actual = cudaProduct(dev, a, b, s);
    const std::size_t at = firstBitDifference(expected, actual);
    ASSERT_EQ(actual.size(), expected.size());
    ASSERT_EQ(at, expected.size()) << "output " << at << ": host " << expected[at] << " vs cuda " << actual[at];
  }
}

// Overflow to infinity, signed zeros and subnormals take the same path on both devices. (Products
// that make a NaN are left out: the contract fixes the value of every finite and infinite result,
// but a NaN's payload bits are the hardware's own.)
TEST(CudaMatMul, BitIdenticalWithInfinitiesZerosAndSubnormals) {
  auto dev = cudaDevice();
  const Shape s{33, 19, 70};
  auto a = matrixValues(s.rows * s.inner, 5);
  auto b = matrixValues(s.inner * s.cols, 6);
  for (Index k = 0; k < s.inner; ++k) a[static_cast<std::size_t>(k)] = 1e308;      // row 0 ...
  for (Index k = 0; k < s.inner; ++k) b[static_cast<std::size_t>(k * s.cols)] = 1.0;  // ... times column 0 overflows to +inf
  for (Index k = 0; k < s.inner; ++k) a[static_cast<std::size_t>(s.inner + k)] = -0.0;  // row 1: all -0.0
  for (Index k = 0; k < s.inner; ++k) a[static_cast<std::size_t>(2 * s.inner + k)] = 3e-310;  // row 2: subnormal
  const auto expected = hostProduct(a, b, s);
  const auto actual = cudaProduct(dev, a, b, s);
  const std::size_t at = firstBitDifference(expected, actual);
  ASSERT_EQ(at, expected.size()) << "output " << at << ": host " << expected[at] << " vs cuda " << actual[at];
  EXPECT_TRUE(std::isinf(actual[0]));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(actual[static_cast<std::size_t>(s.cols)]), 0u);  // +0.0: the sum starts at +0.0
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
