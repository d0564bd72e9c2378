// The handlers every typed test runs on, and how a test obtains one.
//
// Each test binary defines OSPREY_TESTED_HANDLERS before including the typed-test headers:
// the host binary tests Lists and GpuHost; the cuda binary (built by nvcc) tests GpuCuda.
// Test bodies call named function templates that hold the kernels (an nvcc extended lambda may
// not live in a gtest body, which is a private member function).
#pragma once

#include <string>

#include "osprey/gpu/host_handler.hpp"
#include "osprey/lists/lists.hpp"
#if defined(__CUDACC__)
#include "osprey/gpu/cuda_handler.hpp"
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

#if defined(__CUDACC__)
template <>
inline GpuCuda makeHandler<GpuCuda>() {
  auto device = CudaDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return GpuCuda(*device);
}
#endif

// The awkward sizes every element-wise operation is checked on (DESIGN.md §7.5).
inline constexpr Index kAwkwardSizes[] = {0, 1, 2, 7, 31, 32, 33, 255, 256, 257, 1023, 1024, 1025,
                                          768, 3072, 4095, 4096, 4097, 50257};

}  // namespace osprey::testing
