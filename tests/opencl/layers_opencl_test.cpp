// GPT-2's layers on the opencl device: every layer's typed test (forward against host float64
// loops, backward against finite differences, decoding against the full pass).
#define OSPREY_TESTED_HANDLERS ::osprey::GpuOpenCl
#include "layers/layer_typed_tests.hpp"
