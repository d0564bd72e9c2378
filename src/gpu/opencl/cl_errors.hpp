// OpenCL's error codes in the device's messages ("... failed: CL_OUT_OF_RESOURCES (-5)").
#pragma once

#include <CL/cl.h>

#include <string_view>

#include "osprey/result.hpp"

namespace osprey::opencl_detail {

// The code's name, or "an OpenCL error" for one this file does not list.
const char* errorName(cl_int code);

// "opencl: <what> failed: <name> (<code>)".
Error clError(std::string_view what, cl_int code);

}  // namespace osprey::opencl_detail
