// Every cuda test program's precondition: a GPU. Without one, every test would fail the same way, so
// the program says once why (the device's own error: no driver, no device, a bad
// OSPREY_CUDA_DEVICE), runs nothing and exits non-zero. It never falls back to the host.
#include <cerrno>  // program_invocation_short_name (glibc)
#include <cstdio>

#include <gtest/gtest.h>

#include "osprey/gpu/cuda/device.hpp"

namespace osprey::testing {
namespace {

class CudaDeviceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto device = CudaDevice::open();
    if (!device.ok()) GTEST_FAIL() << "the cuda tests need a GPU and found none: " << device.error().message;
    std::printf("%s on %s (%d multiprocessors)\n", program_invocation_short_name, (*device)->name().c_str(),
                (*device)->multiprocessors());
  }
};

[[maybe_unused]] ::testing::Environment* const kCudaEnvironment =
    ::testing::AddGlobalTestEnvironment(new CudaDeviceEnvironment);

}  // namespace
}  // namespace osprey::testing
