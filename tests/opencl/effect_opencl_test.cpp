// The effect's typed tests on the opencl device (its kernels traced to OpenCL C).
#define OSPREY_TESTED_HANDLERS ::osprey::GpuOpenCl
#include "effect/effect_typed_tests.hpp"
