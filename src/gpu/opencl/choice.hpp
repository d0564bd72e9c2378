// Which OpenCL device the opencl device runs on: the first with doubles (fma, round to nearest,
// subnormals, infinities and NaN), GPUs before CPUs, or the one OSPREY_OPENCL_PLATFORM and
// OSPREY_OPENCL_DEVICE name (each a part of the name, case-insensitive, or a number in the order
// clinfo lists). A device without such doubles is never chosen: the error lists what was seen.
#pragma once

#include <CL/cl.h>

#include <string>

#include "osprey/result.hpp"

namespace osprey::opencl_detail {

struct ChosenDevice {
  cl_platform_id platform;
  cl_device_id device;
  std::string name;  // what device() answers: "opencl: pocl cpu", "opencl: NVIDIA H200"
};

Result<ChosenDevice> chooseDevice();

}  // namespace osprey::opencl_detail
