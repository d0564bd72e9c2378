// OSPREY_CUDA_CHECK: the one checked-call macro for the CUDA runtime (DESIGN.md §7.8).
//
//   OSPREY_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
//   OSPREY_CUDA_CHECK(cudaGetLastError(), "forEach<BuildBody<…>> launch");   // optional context
//
// On failure it returns, from the enclosing function (which returns some Result<T>), an Error that
// names the call as written, where it is (file:line), the CUDA error's name and words, and what to
// do about it:
//
//   cuda: forEach<…> launch: cudaGetLastError() failed at include/osprey/gpu/cuda/device.hpp:120:
//   cudaErrorNoKernelImageForDevice (no kernel image is available for execution on the device)
//   — this binary holds no code for this GPU: rebuild with -DOSPREY_CUDA_ARCH=<its compute capability>
//
// Errors after which the CUDA context cannot be used again ("sticky" errors: an illegal address
// inside a kernel, a device-side assert, ...) say so: every later CUDA call in the process fails
// with the same error, so the only remedy is to end the process.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "osprey/result.hpp"

namespace osprey::cuda {

// True for errors that leave the CUDA context unusable for the rest of the process.
inline bool isSticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

// What a user can do about an error.
inline std::string_view hintFor(cudaError_t status) {
  if (isSticky(status))
    return "the CUDA context is now unusable and every later CUDA call in this process will fail: "
           "end the process; rerun under compute-sanitizer to find the faulting access";
  switch (status) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
    case cudaErrorSystemNotReady:
      return "run on a machine with an NVIDIA GPU and a working driver, or choose OSPREY_GPU=host";
    case cudaErrorInvalidDevice:
      return "OSPREY_CUDA_DEVICE names a GPU this machine does not have";
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory: release buffers or use smaller sizes";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInvalidPtx:
      return "this binary holds no code for this GPU: rebuild with "
             "-DOSPREY_CUDA_ARCH=<the GPU's compute capability, e.g. 90 for H100/H200>";
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchOutOfResources:
      return "the launch asked for more threads, registers or shared memory than the GPU allows: "
             "this is a bug in osprey's launch parameters, please report it with this message";
    default:
      return "this is unexpected: please report it with this message";
  }
}

// "/work/main/include/osprey/gpu/cuda/device.hpp" -> "include/osprey/gpu/cuda/device.hpp"
inline std::string_view projectPath(std::string_view file) {
  for (std::string_view root : {"/include/osprey/", "/src/", "/tests/", "/bench/", "/examples/"}) {
    const auto at = file.rfind(root);
    if (at != std::string_view::npos) return file.substr(at + 1);
  }
  return file;
}

// The Error for a failed call. Clears the runtime's last-error slot (cudaGetLastError), so a
// non-sticky failure (an allocation that did not fit) is not reported again by the next launch's
// check; for a sticky error the slot cannot be cleared, and the message says so.
inline Error failure(cudaError_t status, std::string_view call, std::string_view file, int line,
                     std::string_view context = {}) {
  (void)cudaGetLastError();
  return Error{fmt::format("cuda: {}{}{} failed at {}:{}: {} ({}) — {}", context,
                           context.empty() ? "" : ": ", call, projectPath(file), line,
                           cudaGetErrorName(status), cudaGetErrorString(status), hintFor(status))};
}

}  // namespace osprey::cuda

// The checked call. The optional second argument names what was being done (the kernel, the size).
#define OSPREY_CUDA_CHECK(call, ...)                                                            \
  do {                                                                                          \
    const cudaError_t osprey_cuda_status_ = (call);                                             \
    if (osprey_cuda_status_ != cudaSuccess)                                                     \
      return ::osprey::cuda::failure(osprey_cuda_status_, #call, __FILE__,                      \
                                     __LINE__ __VA_OPT__(, ) __VA_ARGS__);                      \
  } while (0)
