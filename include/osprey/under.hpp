// The boundary: the only place a name becomes a handler (DESIGN.md §3).
//
//   chooseBackend(backend, device)   which handler the names choose, or the error naming the bad
//                                    choice (every such message lives here)
//   onLists(work)        runs work(Lists&)
//   onGpuHost(work)      runs work(GpuHost&)
//   onGpuCuda(work)      runs work(GpuCuda&)          (code nvcc compiled; elsewhere an error)
//   onGpuOpenCl(work)    runs work(GpuOpenCl&)        (code linked with osprey_opencl, which defines
//                                                      OSPREY_WITH_OPENCL; elsewhere an error)
//   onGpu(work)          runs work(Gpu<D>&) on the device OSPREY_GPU names (host | cuda | opencl;
//                        default host)
//   onFast<H>(work)      runs work(H&): the fast handler on the cuda device (gpu/cuda/fast.hpp), or
//                        a handler built on it (H constructible from Fast&&)
//   under(name, work)    "lists" | "gpu" | "fast"; anything else runs nothing and returns
//                        "unknown backend `x`: choose gpu, fast or lists"
//
// `work` is generic over the handler and must return a Result<T> of one T for every handler.
// Each on*() opens its device, runs work strictly (osprey/strict.hpp) and, on cuda, waits for the
// device's deferred faults before it returns. The cuda device is only reachable from code nvcc
// compiled (a .cu translation unit); asked for it elsewhere, it returns an error naming the
// problem: never a silent CPU fallback. A program that links nvcc-compiled entry points of its own
// (osprey-gpt2) says so with chooseBackend's `cudaLinked`.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "osprey/gpu/host/handler.hpp"
#include "osprey/lists/lists.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"
#if defined(__CUDACC__)
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/fast.hpp"
#endif
#if defined(OSPREY_WITH_OPENCL)
#include "osprey/gpu/opencl/handler.hpp"
#endif

namespace osprey {

// The device OSPREY_GPU asks for ("host" when unset), or an error naming a bad value.
inline Result<std::string> gpuDeviceFromEnvironment() {
  const char* env = std::getenv("OSPREY_GPU");
  std::string name = env && *env ? env : "host";
  if (name != "host" && name != "cuda" && name != "opencl")
    return Error{fmt::format("unknown gpu device `{}` (OSPREY_GPU): choose host, cuda or opencl", name)};
  return name;
}

// The handlers a name can choose.
enum class Backend { Lists, GpuHost, GpuCuda, GpuOpenCl, Fast };

#if defined(__CUDACC__)
inline constexpr bool kCompiledByNvcc = true;
#else
inline constexpr bool kCompiledByNvcc = false;
#endif
#if defined(OSPREY_WITH_OPENCL)
inline constexpr bool kOpenClLinked = true;
#else
inline constexpr bool kOpenClLinked = false;
#endif

// The handler `backend` ("lists" | "gpu" | "fast") and `device` (gpu only: "host" | "cuda" |
// "opencl"; empty: OSPREY_GPU, else host) choose. `cudaLinked` / `openclLinked`: whether the program
// can reach the cuda / opencl device.
inline Result<Backend> chooseBackend(std::string_view backend, std::string_view device = {},
                                     bool cudaLinked = kCompiledByNvcc, bool openclLinked = kOpenClLinked) {
  if (backend == "lists") {
    if (!device.empty())
      return Error{fmt::format("device `{}` applies to the gpu backend; the lists backend runs on the host", device)};
    return Backend::Lists;
  }
  if (backend == "fast") {
    if (!device.empty() && device != "cuda")
      return Error{fmt::format("device `{}`: the fast backend runs on the cuda device only (float storage, "
                               "tensor-core products); choose device cuda or leave it out",
                               device)};
    if (!cudaLinked)
      return Error{"backend `fast` runs on a CUDA device: this program was built without nvcc (rebuild where "
                   "nvcc is installed, or choose gpu or lists)"};
    return Backend::Fast;
  }
  if (backend != "gpu") return Error{fmt::format("unknown backend `{}`: choose gpu, fast or lists", backend)};
  std::string name(device);
  if (name.empty()) name = OSPREY_TRY(gpuDeviceFromEnvironment());
  if (name == "host") return Backend::GpuHost;
  if (name == "cuda") {
    if (!cudaLinked)
      return Error{"gpu device `cuda`: this program was built without nvcc, so it cannot run on a CUDA device "
                   "(rebuild where nvcc is installed, or choose device host)"};
    return Backend::GpuCuda;
  }
  if (name == "opencl") {
    if (!openclLinked)
      return Error{"gpu device `opencl`: this program was built without the OpenCL loader and headers, so it "
                   "cannot run on an OpenCL device (install ocl-icd-opencl-dev and opencl-c-headers and rebuild, or "
                   "choose device host)"};
    return Backend::GpuOpenCl;
  }
  return Error{fmt::format("unknown gpu device `{}`: choose host, cuda or opencl", name)};
}

template <class Work>
auto onLists(Work&& work) {
  Lists handler;
  return strictly([&] { return work(handler); });
}

template <class Work, class R = std::invoke_result_t<Work&, GpuHost&>>
R onGpuHost(Work&& work) {
  auto dev = HostDevice::open();
  if (!dev.ok()) return R(dev.error());
  GpuHost handler(*dev);
  return strictly([&] { return work(handler); });
}

#if defined(__CUDACC__)
template <class Work, class R = std::invoke_result_t<Work&, GpuCuda&>>
R onGpuCuda(Work&& work) {
  auto dev = CudaDevice::open();
  if (!dev.ok()) return R(dev.error());
  GpuCuda handler(*dev);
  return afterFlush(**dev, R(strictly([&] { return work(handler); })));
}
#else
template <class Work>
auto onGpuCuda(Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  (void)work;
  return R(chooseBackend("gpu", "cuda").error());
}
#endif

#if defined(OSPREY_WITH_OPENCL)
template <class Work, class R = std::invoke_result_t<Work&, GpuOpenCl&>>
R onGpuOpenCl(Work&& work) {
  auto dev = OpenClDevice::open();
  if (!dev.ok()) return R(dev.error());
  GpuOpenCl handler(*dev);
  return strictly([&] { return work(handler); });
}
#else
template <class Work>
auto onGpuOpenCl(Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  (void)work;
  return R(chooseBackend("gpu", "opencl").error());
}
#endif

// onGpu with an explicit device name ("host" | "cuda" | "opencl").
template <class Work>
auto onGpuDevice(std::string_view device, Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  const auto chosen = chooseBackend("gpu", device.empty() ? std::string_view("host") : device);
  if (!chosen.ok()) return R(chosen.error());
  if (*chosen == Backend::GpuCuda) return onGpuCuda(std::forward<Work>(work));
  if (*chosen == Backend::GpuOpenCl) return onGpuOpenCl(std::forward<Work>(work));
  return onGpuHost(std::forward<Work>(work));
}

template <class Work>
auto onGpu(Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  auto device = gpuDeviceFromEnvironment();
  if (!device.ok()) return R(device.error());
  return onGpuDevice(*device, std::forward<Work>(work));
}

// The fast handler (float storage, tensor-core products) on the cuda device OSPREY_CUDA_DEVICE
// names, or a handler built on it (a model's derived operations: Handler(Fast&&)). Host-compiled
// code cannot reach it and says so.
#if defined(__CUDACC__)
template <class Handler = Fast, class Work, class R = std::invoke_result_t<Work&, Handler&>>
R onFast(Work&& work) {
  auto base = Fast::open();
  if (!base.ok()) return R(base.error());
  Handler handler(std::move(*base));
  return afterFlush(*handler.runtime(), R(strictly([&] { return work(handler); })));
}
#else
template <class Handler = void, class Work>
auto onFast(Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  (void)work;
  return R(chooseBackend("fast").error());
}
#endif

template <class Work>
auto under(std::string_view name, Work&& work) -> decltype(onLists(work)) {
  using R = decltype(onLists(work));
  const auto chosen = chooseBackend(name);
  if (!chosen.ok()) return R(chosen.error());
  switch (*chosen) {
    case Backend::Lists: return onLists(std::forward<Work>(work));
    case Backend::GpuHost: return onGpuHost(std::forward<Work>(work));
    case Backend::GpuCuda: return onGpuCuda(std::forward<Work>(work));
    case Backend::GpuOpenCl: return onGpuOpenCl(std::forward<Work>(work));
    case Backend::Fast: return onFast(std::forward<Work>(work));
  }
  return R(Error{"unreachable backend"});
}

}  // namespace osprey
