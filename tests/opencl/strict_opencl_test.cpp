// Strict faults inside kernels on the opencl device: recorded in its fault slot, returned by the
// launching operation with the host's words.
#define OSPREY_TESTED_HANDLERS ::osprey::GpuOpenCl
#include "strict/strict_typed_tests.hpp"
