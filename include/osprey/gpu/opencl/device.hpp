// The `opencl` device runtime: the GPU surface on any OpenCL device with doubles (an NVIDIA GPU
// through its driver, a CPU through PoCL).
//
// OpenCL takes kernels as OpenCL C source, and a kernel here is a C++ closure, so this device
// traces each kernel once per launch (osprey/trace/): it calls the closure with traced values
// (KernelIndex, KernelScalar), emits OpenCL C from what was recorded, compiles each distinct text
// once (the program cache) and launches it with the call's buffers and captured numbers as
// arguments. Kernels written against the handler's KernelIndex/KernelScalar therefore run here
// from the one source the other devices compile directly.
//
// The exact contract holds as on the host: programs are built with FP_CONTRACT OFF and no
// fast-math option, every product is an fma chain in k order from +0.0, fold is one left fold in
// element order, and a device without cl_khr_fp64 is refused when opened. A kernel that cannot be
// traced does not compile (its KernelIndex overload is missing), and a program the device's
// compiler rejects stops the launch with the kernel's name and the build log.
//
// Choosing a device: OSPREY_OPENCL_PLATFORM and OSPREY_OPENCL_DEVICE, each a (case-insensitive)
// part of the name to look for or a number in the order clinfo lists; by default the first
// device with doubles, GPUs before CPUs.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>

#include "osprey/config.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/gpu/device_runtime.hpp"
#include "osprey/result.hpp"
#include "osprey/trace/opencl_source.hpp"
#include "osprey/trace/values.hpp"
#include "osprey/view.hpp"

namespace osprey {

namespace opencl_detail {
template <class B>
struct IsBuildBody : std::false_type {};
template <class K>
struct IsBuildBody<BuildBody<K, Scalar>> : std::true_type {};
template <class>
inline constexpr bool kAlwaysFalse = false;

// A readable name for a kernel's type, for errors ("gpt2::layernormForward<...>::{lambda(...)#2}").
std::string kernelName(const std::type_info& type);
}  // namespace opencl_detail

class OpenClDevice {
 public:
  using KernelIndex = trace::Idx;
  using KernelScalar = trace::Num;

  static Result<std::shared_ptr<OpenClDevice>> open();
  ~OpenClDevice();
  OpenClDevice(const OpenClDevice&) = delete;
  OpenClDevice& operator=(const OpenClDevice&) = delete;

  // "opencl: NVIDIA H200", "opencl: pocl cpu".
  std::string name() const;

  Result<Scalar*> allocate(Index n);
  void release(Scalar* p);
  Result<void> upload(Scalar* dst, const Scalar* src, Index n);
  Result<void> download(Scalar* dst, const Scalar* src, Index n);
  Result<Scalar> readOne(const Scalar* p);

  // build's body: out[i] = kernel(i) for every i < n, the kernel traced with a KernelIndex.
  template <class Body>
  Result<void> forEach(Index n, const Body& body) {
    if constexpr (opencl_detail::IsBuildBody<Body>::value) {
      using K = decltype(body.kernel);
      static_assert(std::is_invocable_v<const K&, trace::Idx>,
                    "opencl: this kernel cannot be traced: it must take the handler's KernelIndex "
                    "(osprey::KernelIndex<H>) and compute with KernelScalar, not osprey::Index / Scalar");
      if (n == 0) return {};
      trace::Graph graph;
      int result = -1;
      {
        trace::Recording recording(graph);
        const trace::Num value = body.kernel(trace::Idx{trace::detail::FromNode{}, graph.param()});
        result = value.id;
      }
      return launch(graph, result, trace::Shape::EachIndex, body.out, n, opencl_detail::kernelName(typeid(K)));
    } else {
      static_assert(opencl_detail::kAlwaysFalse<Body>, "opencl: forEach launches build's bodies (BuildBody) only");
      return Error{"opencl: unsupported body"};
    }
  }

  // combine(...combine(seed, v[0])..., v[n-1]) by one work item, in element order.
  template <class C>
  Result<Scalar> fold(View v, Scalar seed, C combine) {
    static_assert(std::is_invocable_v<const C&, trace::Num, trace::Num>,
                  "opencl: this combine cannot be traced: it must take the handler's KernelScalar");
    trace::Graph graph;
    int result = -1;
    {
      trace::Recording recording(graph);
      const trace::Num folded = trace::loop(trace::Num(seed), trace::Idx(Index{0}), trace::Idx(v.n),
                                            [&](trace::Idx k, trace::Num acc) -> trace::Num { return combine(acc, v[k]); });
      result = folded.id;
    }
    return foldResult(graph, result, opencl_detail::kernelName(typeid(C)));
  }

  Result<Index> indexOf(View v, Scalar x);
  Result<void> matMul(Scalar* out, View a, View b, Index rows, Index inner, Index cols);

  // How many distinct programs were compiled (each kernel text once).
  std::size_t compiledPrograms() const;

 private:
  struct State;
  explicit OpenClDevice(std::unique_ptr<State> state);

  Result<void> copy(const Scalar* device, Scalar* host, Index n, bool toDevice);
  Result<void> launch(const trace::Graph& graph, int result, trace::Shape shape, Scalar* out, Index n,
                      const std::string& kernel);
  Result<Scalar> foldResult(const trace::Graph& graph, int result, const std::string& kernel);

  std::unique_ptr<State> m;
};

OSPREY_ASSERT_DEVICE(OpenClDevice, "opencl");

}  // namespace osprey
