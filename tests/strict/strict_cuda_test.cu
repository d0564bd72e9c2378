// Strict kernel faults on the cuda device (gpu/cuda): the same cases as the host binary, compiled
// by nvcc, so each fault is recorded in the device's fault slot. These cases expect the launching
// operation itself to return the fault, so they run with every launch checked as it completes
// (GpuCudaEachLaunch); the default, deferred checking is covered by tests/cuda/cuda_device_test.cu.
#include "cuda/cuda_each_launch_handler.hpp"
#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::testing::GpuCudaEachLaunch
#include "strict/strict_typed_tests.hpp"
