// How a cuda kernel's strict fault reaches the host: the unit's fault-launch stamp, the kernel
// labels errors name, and where a unit's slot and stamp live (osprey/gpu/cuda/device.hpp describes
// the deferred checks that read them).
//
// Why these helpers and the kernels (kernels/*.hpp) sit in an unnamed namespace: strict.hpp's
// fault slot is a `static __device__` variable, one per translation unit (nvcc compiles each .cu
// as a whole program), and a kernel writes the slot of the module it was compiled into. If the kernel templates had
// external linkage, two .cu files instantiating forEachKernel<SameBody> would have their host
// stubs merged by the linker, and the launch could run one unit's kernel while reading the other
// unit's slot, losing the fault. With internal linkage every unit launches its own kernels; each
// unit's slot and stamp are registered with the device on the unit's first launch, and a check
// reads every registered unit's slot.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/launch_faults.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>
#include <cxxabi.h>

#include <cstdlib>
#include <string>
#include <typeinfo>

#include <fmt/format.h>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/kernel_clock.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"

namespace osprey::cuda_detail {

// Where one translation unit's fault slot and fault-launch stamp live on the device.
struct UnitAddresses {
  DeviceFault* fault = nullptr;
  unsigned long long* launch = nullptr;
};

// What the host copies back from one unit's slot at a check (pinned memory, so the copy can be
// queued behind the kernels and waited for with the same synchronisation as the data).
struct SlotReadback {
  DeviceFault fault;
  unsigned long long launch;
};

// How a launch is named in an error; called only when that launch faulted.
using LabelFunction = std::string (*)();

namespace {  // internal linkage: see the top of this file

constexpr int kThreadsPerBlock = 256;

// The number of the first launch of this unit whose thread recorded a fault (0: none yet).
__device__ unsigned long long faultLaunch;

// Before a thread exits: if the slot holds a fault and no launch has claimed it yet, it was this
// launch (kernels on the stream run one after another, and the recording thread itself gets here
// before its kernel ends). The volatile reads see memory, not a stale cached copy; reading the
// stamp before the atomic keeps the threads of later launches (until the fault is reported) from
// all queueing on one atomic.
__device__ __forceinline__ void stampFault(unsigned long long launch) {
#if OSPREY_DEVICE_PASS
  if (*static_cast<volatile int*>(&osprey_device_fault.kind) != 0 &&
      *static_cast<volatile unsigned long long*>(&faultLaunch) == 0)
    atomicCAS(&faultLaunch, 0ull, launch);
#endif
}

// A readable kernel label for errors: "forEach<osprey::BuildBody<…>>".
template <class T>
std::string demangledName() {
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, &status);
  std::string type = status == 0 && demangled ? demangled : typeid(T).name();
  std::free(demangled);
  return type;
}
template <class T>
std::string kernelLabel(const char* kernel) {
  std::string type = demangledName<T>();
  constexpr std::size_t kLongest = 160;
  if (type.size() > kLongest) type = type.substr(0, kLongest) + "…";
  return fmt::format("{}<{}>", kernel, type);
}
template <class Body>
std::string forEachLabel() {
  return kernelLabel<Body>("forEach");
}
template <class C>
std::string foldLabel() {
  return kernelLabel<C>("fold");
}
template <class T>
std::string rowFoldLabel() {
  return kernelLabel<T>("foldRows");
}
template <class T>
std::string treeFoldLabel() {
  return kernelLabel<T>("foldRows (tree)");
}

// The kernel clock's labels (kernel_clock.hpp): the kernel and the functions its closures were
// written in, which stay apart where the error labels' first 160 characters would not.
template <class T>
std::string forEachSites() {
  return "forEach " + closureSites(demangledName<T>());
}
template <class T>
std::string rowFoldSites() {
  return "foldRows " + closureSites(demangledName<T>());
}
template <class T>
std::string treeFoldSites() {
  return "foldRows (tree) " + closureSites(demangledName<T>());
}
template <class C>
std::string foldSites() {
  return "fold " + closureSites(demangledName<C>());
}

// This unit's slot and stamp on the current device (each device loads its own copy of the module).
inline Result<UnitAddresses> thisUnitAddresses() {
  void* fault = nullptr;
  void* launch = nullptr;
  OSPREY_CUDA_CHECK(cudaGetSymbolAddress(&fault, osprey_device_fault), "finding the fault slot");
  OSPREY_CUDA_CHECK(cudaGetSymbolAddress(&launch, faultLaunch), "finding the fault-launch stamp");
  return UnitAddresses{static_cast<DeviceFault*>(fault), static_cast<unsigned long long*>(launch)};
}
// Its address names this translation unit.
const char thisUnit = 0;

}  // namespace
}  // namespace osprey::cuda_detail
