// Raw device pointers on the cuda device (gpu/raw_pointer.hpp, gpu/cuda/raw_pointer.hpp): memory
// cudaMalloc gave someone else, used in place; addresses the GPU cannot read refused with an
// Error before any kernel runs, leaving no CUDA error behind; the owner released only after the
// work queued on it. Runs on the GPU machine (scripts/gpu-check.sh), like every *_test.cu.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/raw_pointer.hpp"
#include "osprey/gpu/surface.hpp"

namespace osprey::testing {
namespace {

std::shared_ptr<CudaDevice> cudaDevice() {
  auto device = CudaDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return *device;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CudaRawPointer, RawDevicePtrIsDeviceMemoryOfThisGpu) {
  auto dev = cudaDevice();
  auto x = toGpu(dev, std::vector<Scalar>{1, 2, 3, 4});
  ASSERT_TRUE(x.ok());
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, rawDevicePtr(*x)), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  auto ordinal = cudaOrdinal(*dev);
  ASSERT_TRUE(ordinal.ok()) << ordinal.error().message;
  EXPECT_EQ(a.device, *ordinal);
}

TEST(CudaRawPointer, MemoryFromCudaMallocIsUsedInPlace) {
  auto dev = cudaDevice();
  const std::vector<Scalar> values{1, 2, 3, 4};
  double* outside = nullptr;
  ASSERT_EQ(cudaMalloc(&outside, sizeof(double) * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(outside, values.data(), sizeof(double) * 4, cudaMemcpyHostToDevice), cudaSuccess);
  bool released = false;
  {
    auto owner = std::shared_ptr<double>(outside, [&released](double* p) {
      released = true;
      (void)cudaFree(p);
    });
    auto x = bufFromRawDevicePtr(dev, outside, 4, std::shared_ptr<const void>(owner));
    ASSERT_TRUE(x.ok()) << x.error().message;
    owner.reset();
    EXPECT_EQ(rawDevicePtr(*x), outside);
    auto y = gpuMatMul(*x, *x, 2, 2, 2);
    ASSERT_TRUE(y.ok());
    EXPECT_FALSE(released);
    EXPECT_EQ(*fromGpu(*y), (std::vector<Scalar>{7, 10, 15, 22}));
  }
  EXPECT_TRUE(released) << "the last copy gone, the owner's cudaFree ran";
}

TEST(CudaRawPointer, HostMemoryIsRefusedAndLeavesNoError) {
  auto dev = cudaDevice();
  std::vector<Scalar> host{1, 2, 3, 4};
  auto x = bufFromRawDevicePtr(dev, host.data(), 4);
  ASSERT_FALSE(x.ok());
  EXPECT_TRUE(contains(x.error().message, "not memory of a GPU")) << x.error().message;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the refusal left a CUDA error behind";
  auto y = toGpu(dev, std::vector<Scalar>{1, 2});  // the device is as usable as before
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*gpuGet(*y, 1), 2.0);
}

TEST(CudaRawPointer, AnAddressPastTheAllocationIsRefused) {
  auto dev = cudaDevice();
  double* outside = nullptr;
  ASSERT_EQ(cudaMalloc(&outside, sizeof(double) * 4), cudaSuccess);
  // The driver's allocation granularity is far above 4 doubles; ask for well past it.
  auto x = bufFromRawDevicePtr(dev, outside, Index{1} << 40);
  EXPECT_FALSE(x.ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  (void)cudaFree(outside);
}

}  // namespace
}  // namespace osprey::testing
