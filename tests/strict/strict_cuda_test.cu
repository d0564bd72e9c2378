// Strict kernel faults on the cuda device (gpu/cuda): the same cases as the host binary, compiled
// by nvcc, so each fault is recorded in the device's fault slot and returned by the launch.
#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::GpuCuda
#include "strict/strict_typed_tests.hpp"
