// The cuda device's part of raw_pointer.hpp (nvcc only): which GPU a device is, whether an
// address is memory it can read (asked of the CUDA driver, so a wrong address is an Error
// instead of a kernel's illegal access, which would leave the context unusable), and the wait
// before borrowed memory goes back to its owner.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/raw_pointer.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "osprey/gpu/cuda/device.hpp"
#include "osprey/result.hpp"

namespace osprey {

namespace cuda_detail {
// What the driver says of one address: its memory type and GPU, or the error (cleared, so that
// it is not left for the next CUDA call to report).
inline Result<cudaPointerAttributes> pointerAttributes(const void* p) {
  cudaPointerAttributes a{};
  const cudaError_t status = cudaPointerGetAttributes(&a, p);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return Error{fmt::format("the CUDA driver does not know address {}: {} ({})", p, cudaGetErrorString(status),
                             cudaGetErrorName(status))};
  }
  return a;
}

inline const char* memoryTypeName(cudaMemoryType type) {
  switch (type) {
    case cudaMemoryTypeUnregistered: return "unregistered host memory";
    case cudaMemoryTypeHost: return "pinned host memory";
    case cudaMemoryTypeDevice: return "device memory";
    case cudaMemoryTypeManaged: return "managed memory";
  }
  return "memory of an unknown type";
}
}  // namespace cuda_detail

// The ordinal of the GPU `dev` runs on (what DLPack calls the device id): the driver is asked
// where a block the device allocates lives, since the device keeps its ordinal to itself.
inline Result<int> cudaOrdinal(CudaDevice& dev) {
  double* probe = OSPREY_TRY(dev.allocate(1));
  auto attributes = cuda_detail::pointerAttributes(probe);
  dev.release(probe);
  if (!attributes.ok()) return attributes.error();
  return attributes->device;
}

// Device or managed memory of this device's GPU, first and last byte alike.
inline Result<void> checkRawAddress(CudaDevice& dev, const void* p, std::size_t bytes) {
  const int ordinal = OSPREY_TRY(cudaOrdinal(dev));
  const auto* first = static_cast<const unsigned char*>(p);
  for (const void* at : {static_cast<const void*>(first), static_cast<const void*>(first + bytes - 1)}) {
    const auto a = OSPREY_TRY(cuda_detail::pointerAttributes(at));
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      return Error{fmt::format("{}: address {} is {}, not memory of a GPU", dev.name(), at,
                               cuda_detail::memoryTypeName(a.type))};
    // A managed block is readable from any GPU; device memory only from its own.
    if (a.type == cudaMemoryTypeDevice && a.device != ordinal)
      return Error{fmt::format("{}: address {} is memory of GPU {}, and this device is GPU {}", dev.name(), at,
                               a.device, ordinal)};
  }
  return {};
}

// Work queued before the last copy of a borrowed buffer went away may still read it: wait for
// the device's stream before its owner gets it back. (A failure here cannot be reported to
// anyone; the next operation on the device reports a fault that caused it.)
inline void settleBeforeReturning(CudaDevice& dev) { (void)cudaStreamSynchronize(dev.stream()); }

}  // namespace osprey
