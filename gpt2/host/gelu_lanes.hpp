// GELU on gpu/host, four elements at a time: the shared geluValue and geluSlope (gpt2/layers/
// gelu.hpp) evaluated over the host's vector lanes (osprey/gpu/host/lanes.hpp), each lane the
// double computation bit for bit. GELU's tanh was the training step's largest element-wise cost on
// the host (bench/RESULTS.md). Compiled once by the host compiler (gelu_lanes.cpp), so every
// translation unit, nvcc's included, sees only these declarations.
#pragma once

#include "osprey/gpu/host/handler.hpp"
#include "osprey/result.hpp"

namespace gpt2::host_lanes {

// out = gelu(x), element-wise.
osprey::Result<osprey::GpuHost::Buffer> geluForward(osprey::GpuHost& h, const osprey::GpuHost::Buffer& x);
// dx = dout * gelu'(x), element-wise (the lengths already checked).
osprey::Result<osprey::GpuHost::Buffer> geluBackward(osprey::GpuHost& h, const osprey::GpuHost::Buffer& dout,
                                                     const osprey::GpuHost::Buffer& x);

}  // namespace gpt2::host_lanes
