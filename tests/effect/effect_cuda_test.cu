// The effect's typed tests on the cuda device (gpu/cuda): the same cases the host binary runs for
// lists and gpu/host, compiled by nvcc so every kernel in them runs on the GPU.
#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::GpuCuda
#include "effect/effect_typed_tests.hpp"
