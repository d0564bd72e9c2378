#include "choice.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "cl_errors.hpp"

namespace osprey::opencl_detail {

namespace {

std::string platformInfo(cl_platform_id p, cl_platform_info what) {
  std::size_t size = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string s(size, '\0');
  clGetPlatformInfo(p, what, size, s.data(), nullptr);
  s.resize(std::strlen(s.c_str()));
  return s;
}
std::string deviceInfo(cl_device_id d, cl_device_info what) {
  std::size_t size = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string s(size, '\0');
  clGetDeviceInfo(d, what, size, s.data(), nullptr);
  s.resize(std::strlen(s.c_str()));
  return s;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
// Whether `name` (position `index`) is the one `choice` asks for: a number is a position, anything
// else a part of the name; no choice takes every one.
bool chosen(const char* choice, const std::string& name, std::size_t index) {
  if (!choice || !*choice) return true;
  char* end = nullptr;
  const unsigned long n = std::strtoul(choice, &end, 10);
  if (end && *end == '\0') return n == index;
  return lower(name).find(lower(choice)) != std::string::npos;
}

}  // namespace

Result<ChosenDevice> chooseDevice() {
  cl_uint platformCount = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &platformCount);
  if (err != CL_SUCCESS || platformCount == 0)
    return Error{fmt::format("opencl: no OpenCL platform is installed ({}); on Debian: apt-get install pocl-opencl-icd",
                             err == CL_SUCCESS ? "none registered" : errorName(err))};
  std::vector<cl_platform_id> platforms(platformCount);
  clGetPlatformIDs(platformCount, platforms.data(), nullptr);

  const char* wantPlatform = std::getenv("OSPREY_OPENCL_PLATFORM");
  const char* wantDevice = std::getenv("OSPREY_OPENCL_DEVICE");
  struct Candidate {
    cl_platform_id platform;
    cl_device_id device;
    std::string platformName, deviceName;
    bool gpu;
  };
  std::vector<Candidate> withDoubles;
  std::vector<std::string> without;
  for (std::size_t p = 0; p < platforms.size(); ++p) {
    const std::string platformName = platformInfo(platforms[p], CL_PLATFORM_NAME);
    if (!chosen(wantPlatform, platformName, p)) continue;
    cl_uint deviceCount = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &deviceCount) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(deviceCount);
    clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, deviceCount, devices.data(), nullptr);
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const std::string deviceName = deviceInfo(devices[d], CL_DEVICE_NAME);
      if (!chosen(wantDevice, deviceName, d)) continue;
      cl_device_fp_config fp64 = 0;
      clGetDeviceInfo(devices[d], CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, nullptr);
      const std::string extensions = deviceInfo(devices[d], CL_DEVICE_EXTENSIONS);
      // Doubles with fma and correctly rounded +, -, *, /, sqrt (what CL_FP_FMA and the default
      // rounding promise for cl_khr_fp64), and subnormals.
      const cl_device_fp_config needed = CL_FP_FMA | CL_FP_ROUND_TO_NEAREST | CL_FP_DENORM | CL_FP_INF_NAN;
      if ((fp64 & needed) != needed || extensions.find("cl_khr_fp64") == std::string::npos) {
        without.push_back(fmt::format("{} / {}", platformName, deviceName));
        continue;
      }
      cl_device_type type = 0;
      clGetDeviceInfo(devices[d], CL_DEVICE_TYPE, sizeof type, &type, nullptr);
      withDoubles.push_back({platforms[p], devices[d], platformName, deviceName, (type & CL_DEVICE_TYPE_GPU) != 0});
    }
  }
  if (withDoubles.empty()) {
    std::string seen;
    for (const auto& w : without) seen += fmt::format("\n  {} (no cl_khr_fp64 with fma and subnormals)", w);
    return Error{fmt::format("opencl: no OpenCL device with doubles{}{}{}",
                             wantPlatform || wantDevice ? " matches OSPREY_OPENCL_PLATFORM / OSPREY_OPENCL_DEVICE" : "",
                             seen.empty() ? "" : ":", seen)};
  }
  std::stable_partition(withDoubles.begin(), withDoubles.end(), [](const Candidate& c) { return c.gpu; });
  const Candidate& pick = withDoubles.front();
  ChosenDevice result{pick.platform, pick.device, {}};

  if (lower(pick.platformName).find("portable computing language") != std::string::npos) {
    cl_device_type type = 0;
    clGetDeviceInfo(pick.device, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
    result.name = fmt::format("opencl: pocl {}", (type & CL_DEVICE_TYPE_GPU) ? "gpu" : "cpu");
  } else {
    result.name = "opencl: " + pick.deviceName;
  }
  return result;
}

}  // namespace osprey::opencl_detail
