// The GPU surface as Python sees it: one Buffer type whichever device holds the elements, and the
// device that made it. The host device is compiled by g++ (host_device.cpp), the cuda device by
// nvcc (cuda_device.cu, only where nvcc built the module), the opencl device by g++ with the
// tracer (opencl_device.cpp, only where the build has OpenCL); all are the same template
// (device_on.hpp) over the library's GPU surface, so Python gets exactly what C++ gets.
//
// Nothing here knows Python: the bindings (surface_bindings.cpp, buffer_exchange.cpp,
// dlpack_exchange.cpp) hold Buffers by shared_ptr and turn Results into Success/Error or raise.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "osprey/effect.hpp"
#include "osprey/result.hpp"

namespace osprey::python {

// Where a buffer's elements live, as DLPack names devices. An opencl buffer's address is the
// device's own handle (no memory another library can read through it).
enum class DeviceKind { Host, Cuda, OpenCl };

class DeviceBuffer;
using SharedBuffer = std::shared_ptr<DeviceBuffer>;

// One device runtime, opened.
class Device {
 public:
  virtual ~Device() = default;
  // "host", "cuda: NVIDIA H200", "opencl: pocl cpu": gpuDevice().
  virtual std::string name() const = 0;
  virtual DeviceKind kind() const = 0;
  // The GPU's ordinal on cuda (DLPack's device id); 0 on the host and on opencl.
  virtual int ordinal() const = 0;
  // toGpu: host values copied onto the device.
  virtual Result<SharedBuffer> lift(std::span<const Scalar> values) = 0;
  // gpuLoadTensor: one named tensor of a checkpoint.
  virtual Result<SharedBuffer> loadTensor(const std::string& path, const std::string& name) = 0;
  // bufFromRawDevicePtr: n doubles at `address`, not owned; `owner` is kept until the last copy
  // goes (gpu/raw_pointer.hpp's lifetime rules).
  virtual Result<SharedBuffer> borrow(Scalar* address, Index n, std::shared_ptr<const void> owner) = 0;
};

// Doubles on a device. Immutable from Osprey's side: every operation makes a new buffer.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual const Device& device() const = 0;
  virtual Index size() const = 0;
  // rawDevicePtr: the elements in place (null when empty).
  virtual Scalar* address() const = 0;
  // Keeps the elements alive, for whoever holds the address outside Osprey.
  virtual std::shared_ptr<const void> memory() const = 0;
  virtual Result<Scalar> get(Index i) const = 0;          // gpuGet
  virtual Result<std::vector<Scalar>> toHost() const = 0;  // fromGpu
  // gpuMatMul with this buffer as the left operand; an operand on another device is an Error.
  virtual Result<SharedBuffer> matMul(const DeviceBuffer& right, Index rows, Index inner, Index cols) const = 0;
  // Waits until the work queued to make the elements has run, returning its fault if any (cuda:
  // the device's flush; the host has nothing queued): before the address leaves Osprey.
  virtual Result<void> settle() const = 0;
};

// The device a name chooses ("host" | "cuda" | "opencl"; empty: OSPREY_GPU, else host), with the
// CLI's errors for a bad or unavailable one (osprey::chooseBackend, CudaDevice::open,
// OpenClDevice::open): never the host in place of a device that cannot be had.
Result<std::shared_ptr<Device>> openDevice(std::string_view name);

// The three devices (open_device.cpp chooses among them).
Result<std::shared_ptr<Device>> openHostDevice();
Result<std::shared_ptr<Device>> openCudaDevice();    // cuda_device.cu; without nvcc, cuda_absent.cpp
Result<std::shared_ptr<Device>> openOpenClDevice();  // opencl_device.cpp; without OpenCL, opencl_absent.cpp

// Whether nvcc built this module's cuda parts.
bool builtWithCuda();
// Whether this module links the opencl device (the build found OpenCL's loader and headers).
bool builtWithOpenCl();

}  // namespace osprey::python
