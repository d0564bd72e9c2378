// The handlers every typed test runs on, and how a test obtains one.
//
// Each test binary defines OSPREY_TESTED_HANDLERS before including the typed-test headers:
// the host binary tests Lists and GpuHost; the cuda binary (built by nvcc) tests GpuCuda.
// Test bodies call named function templates that hold the kernels (an nvcc extended lambda may
// not live in a gtest body, which is a private member function).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "osprey/gpu/host/handler.hpp"
#include "osprey/lists/lists.hpp"
#if defined(__CUDACC__)
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/fast.hpp"
#endif
// The opencl test program (tests/opencl/) tests GpuOpenCl.
#if defined(OSPREY_TEST_OPENCL)
#include "osprey/gpu/opencl/handler.hpp"
#endif

namespace osprey::testing {

template <class H>
H makeHandler();

template <>
inline Lists makeHandler<Lists>() {
  return Lists{};
}

template <>
inline GpuHost makeHandler<GpuHost>() {
  return GpuHost(*HostDevice::open());
}

#if defined(OSPREY_TEST_OPENCL)
template <>
inline GpuOpenCl makeHandler<GpuOpenCl>() {
  auto device = OpenClDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return GpuOpenCl(*device);
}
#endif

#if defined(__CUDACC__)
template <>
inline GpuCuda makeHandler<GpuCuda>() {
  auto device = CudaDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return GpuCuda(*device);
}
#endif

// Every element of a buffer, on the host (one download for a device buffer), so a test can
// check each element without one read-back per element.
template <class T>
std::vector<Scalar> readAll(ListsOf<T>&, const typename ListsOf<T>::Buffer& b) {
  return std::vector<Scalar>(b.values().begin(), b.values().end());
}

template <class D>
std::vector<Scalar> readAll(Gpu<D>&, const GpuBuffer<D>& b) {
  auto r = fromGpu(b);
  if (!r.ok()) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}

#if defined(__CUDACC__)
// The fast handler's floats, widened to doubles on the host.
inline std::vector<Scalar> readAll(Fast&, const Fast::Buffer& b) {
  auto r = fromGpu(b);
  if (!r.ok()) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}
#endif

// What device() must answer: exactly `name`, or (for a real GPU, whose model varies) a name
// starting with `name`.
struct DeviceNaming {
  const char* name;
  bool exact;
};
template <class H>
DeviceNaming expectedDeviceNaming();
template <>
inline DeviceNaming expectedDeviceNaming<Lists>() {
  return {"lists", true};
}
template <>
inline DeviceNaming expectedDeviceNaming<GpuHost>() {
  return {"host", true};
}
#if defined(OSPREY_TEST_OPENCL)
template <>
inline DeviceNaming expectedDeviceNaming<GpuOpenCl>() {
  return {"opencl: ", false};
}
#endif
#if defined(__CUDACC__)
template <>
inline DeviceNaming expectedDeviceNaming<GpuCuda>() {
  return {"cuda: ", false};
}
#endif

// Two vectors of doubles hold the same bit patterns (NaN payloads and -0.0 included).
inline bool sameBits(std::span<const Scalar> a, std::span<const Scalar> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

// Index of the first element whose bit pattern differs, or the common size when none does.
inline std::size_t firstBitDifference(std::span<const Scalar> a, std::span<const Scalar> b) {
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  for (std::size_t i = 0; i < n; ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(Scalar)) != 0) return i;
  return n;
}

// Bit identity checked as bits: +0.0 and -0.0 differ, NaNs compare by payload (EXPECT_EQ on
// doubles would see neither). On failure it names the first differing element.
#define EXPECT_SAME_BITS(a, b)                                                                        \
  do {                                                                                                \
    const std::vector<::osprey::Scalar> osprey_left_ = (a), osprey_right_ = (b);                      \
    EXPECT_TRUE(::osprey::testing::sameBits(osprey_left_, osprey_right_))                             \
        << #a << " and " << #b << " differ first at element "                                         \
        << ::osprey::testing::firstBitDifference(osprey_left_, osprey_right_) << " of "               \
        << osprey_left_.size() << " / " << osprey_right_.size();                                      \
  } while (0)

// A readable name per handler for typed-test output ("EffectTest/Lists.build...").
template <class H>
const char* handlerName();
template <>
inline const char* handlerName<Lists>() {
  return "Lists";
}
template <>
inline const char* handlerName<GpuHost>() {
  return "GpuHost";
}
#if defined(OSPREY_TEST_OPENCL)
template <>
inline const char* handlerName<GpuOpenCl>() {
  return "GpuOpenCl";
}
#endif
#if defined(__CUDACC__)
template <>
inline const char* handlerName<GpuCuda>() {
  return "GpuCuda";
}
#endif
struct HandlerNames {
  template <class H>
  static std::string GetName(int) {
    return handlerName<H>();
  }
};

// Deterministic test data: splitmix64 (Steele, Lea, Flood 2014) mapped to [lo, hi). The same
// seed gives the same values on every machine, so a failure can be replayed.
inline std::vector<Scalar> randomValues(std::size_t n, std::uint64_t seed, Scalar lo = -1.0, Scalar hi = 1.0) {
  std::vector<Scalar> out(n);
  std::uint64_t state = seed;
  for (auto& x : out) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    const Scalar unit = static_cast<Scalar>(z >> 11) * 0x1.0p-53;  // [0, 1), exact
    x = lo + (hi - lo) * unit;
  }
  return out;
}

// The fixture of every per-handler typed test: a fresh handler of type H. Each suite names it
// with an alias (`template <class H> using EffectTest = HandlerTest<H>;`) so test names stay.
template <class H>
class HandlerTest : public ::testing::Test {
 protected:
  H handler = makeHandler<H>();
};

// The awkward sizes every element-wise operation is checked on (DESIGN.md §7.5).
inline constexpr Index kAwkwardSizes[] = {0, 1, 2, 7, 31, 32, 33, 255, 256, 257, 1023, 1024, 1025,
                                          768, 3072, 4095, 4096, 4097, 50257};

}  // namespace osprey::testing
