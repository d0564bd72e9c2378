// The boundary: the only place a name becomes a handler (DESIGN.md §3).
//
//   onLists(work)        runs work(Lists&)
//   onGpu(work)          runs work(Gpu<D>&) on the device OSPREY_GPU names (host | cuda; default host)
//   onFast(work)         runs work(Fast&): the fast handler on the cuda device (gpu/fast.hpp)
//   under(name, work)    "lists" | "gpu" | "fast"; anything else runs nothing and returns
//                        "unknown backend `x`: choose gpu, fast or lists"
//
// `work` is generic over the handler and must return a Result<T> of one T for every handler.
// The cuda device is only reachable from code nvcc compiled (a .cu translation unit); a host-
// compiled unit asked for it returns an error naming the problem: never a silent CPU fallback.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "osprey/gpu/host/handler.hpp"
#include "osprey/lists/lists.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#if defined(__CUDACC__)
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/fast.hpp"
#endif

namespace osprey {

// The device OSPREY_GPU asks for ("host" when unset), or an error naming a bad value.
inline Result<std::string> gpuDeviceFromEnvironment() {
  const char* env = std::getenv("OSPREY_GPU");
  std::string name = env && *env ? env : "host";
  if (name != "host" && name != "cuda")
    return Error{fmt::format("unknown gpu device `{}` (OSPREY_GPU): choose host or cuda", name)};
  return name;
}

template <class Work>
auto onLists(Work&& work) {
  Lists handler;
  return strictly([&] { return work(handler); });
}

// onGpu with an explicit device name ("host" | "cuda").
template <class Work>
auto onGpuDevice(std::string_view device, Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  if (device == "host") {
    auto dev = HostDevice::open();
    if (!dev.ok()) return R(dev.error());
    GpuHost handler(*dev);
    return strictly([&] { return work(handler); });
  }
  if (device == "cuda") {
#if defined(__CUDACC__)
    auto dev = CudaDevice::open();
    if (!dev.ok()) return R(dev.error());
    GpuCuda handler(*dev);
    return afterFlush(**dev, R(strictly([&] { return work(handler); })));
#else
    return R(Error{"gpu device `cuda`: this code was compiled without nvcc, so it cannot run on "
                   "a CUDA device (build with nvcc present, or choose OSPREY_GPU=host)"});
#endif
  }
  return R(Error{fmt::format("unknown gpu device `{}`: choose host or cuda", device)});
}

template <class Work>
auto onGpu(Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  auto device = gpuDeviceFromEnvironment();
  if (!device.ok()) return R(device.error());
  return onGpuDevice(*device, std::forward<Work>(work));
}

// The fast handler (float storage, tensor-core products) on the cuda device OSPREY_CUDA_DEVICE
// names. Host-compiled code cannot reach it and says so.
template <class Work>
auto onFast(Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
#if defined(__CUDACC__)
  auto handler = Fast::open();
  if (!handler.ok()) return R(handler.error());
  return afterFlush(*handler->runtime(), R(strictly([&] { return work(*handler); })));
#else
  (void)work;
  return R(Error{"backend `fast` runs on a CUDA device: this code was compiled without nvcc (build with "
                 "nvcc present, or choose gpu or lists)"});
#endif
}

template <class Work>
auto under(std::string_view name, Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  if (name == "lists") return onLists(std::forward<Work>(work));
  if (name == "gpu") return onGpu(std::forward<Work>(work));
  if (name == "fast") return onFast(std::forward<Work>(work));
  return R(Error{fmt::format("unknown backend `{}`: choose gpu, fast or lists", name)});
}

}  // namespace osprey
