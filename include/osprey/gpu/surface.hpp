// The GPU surface: a public API of its own, usable without the effect (DESIGN.md §3).
//
//   auto dev = OSPREY_TRY(HostDevice::open());               // or CudaDevice::open()
//   auto x   = OSPREY_TRY(toGpu(dev, std::array{1.0, 2.0, 3.0, 4.0}));
//   auto y   = OSPREY_TRY(gpuMatMul(x, x, 2, 2, 2));         // [[7, 10], [15, 22]]
//   double first = OSPREY_TRY(gpuGet(y, 0));                 // 7
//
// Every function is generic over the device runtime D and over the element storage T of its
// buffers (double unless a handler stores less: the fast handler's float, gpu/fast.hpp); the
// Gpu<D> handler (handler.hpp) and the fast handler answer the effect with exactly these calls.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "osprey/effect.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/io/tensor_file.hpp"
#include "osprey/shape_check.hpp"

namespace osprey {

template <class T = Scalar, class D>
Result<GpuBuffer<D, T>> gpuAllocate(const std::shared_ptr<D>& dev, Index n) {
  if (n < 0) return Error{fmt::format("{}: negative length {}", dev->name(), n)};
  T* p = nullptr;
  if constexpr (std::is_same_v<T, Scalar>) {
    p = OSPREY_TRY(dev->allocate(n));
  } else {
    p = OSPREY_TRY(dev->template allocate<T>(n));
  }
  return GpuBuffer<D, T>(dev, p, n);
}

// Lift host values onto the device, each rounded once to the storage type T.
template <class T = Scalar, class D>
Result<GpuBuffer<D, T>> toGpu(const std::shared_ptr<D>& dev, std::span<const Scalar> xs) {
  auto out = OSPREY_TRY(gpuAllocate<T>(dev, static_cast<Index>(xs.size())));
  if constexpr (std::is_same_v<T, Scalar>) {
    OSPREY_CHECK(dev->upload(out.data(), xs.data(), out.size()));
  } else {
    const std::vector<T> stored(xs.begin(), xs.end());
    OSPREY_CHECK(dev->upload(out.data(), stored.data(), out.size()));
  }
  return out;
}

namespace detail {
// build's body for kernels already checked by the caller's concept. gpuMap and gpuZipWith come
// here: their ZipKernel/MapKernel wrappers hold a checked closure, but under nvcc's host pass an
// extended lambda's wrapper type is not trivially copyable, so the wrapper itself would not pass
// Kernel (only the lambda does, by its trait).
template <class T = Scalar, class D, class K>
Result<GpuBuffer<D, T>> buildChecked(const std::shared_ptr<D>& dev, Index n, K kernel) {
  auto out = OSPREY_TRY(gpuAllocate<T>(dev, n));
  OSPREY_CHECK(dev->forEach(n, BuildBody<K, T>{out.data(), kernel}));
  return out;
}
}  // namespace detail

// element i = kernel(i), computed on the device.
template <class D, Kernel K>
Result<GpuBuffer<D>> gpuBuild(const std::shared_ptr<D>& dev, Index n, K kernel) {
  return detail::buildChecked(dev, n, kernel);
}

// [0, 1, ..., n-1]
template <class D>
Result<GpuBuffer<D>> gpuIota(const std::shared_ptr<D>& dev, Index n) {
  return gpuBuild(dev, n, IotaKernel{});
}

// f(x[i])
template <class D, class F>
  requires Closure<F>
Result<GpuBuffer<D>> gpuMap(const GpuBuffer<D>& x, F f) {
  return detail::buildChecked(x.device(), x.size(), MapKernel<F>{x.view(), f});
}

// f(a[i], b[i]), stored as the operands are
template <class D, class T, Combine<KernelScalar<D>> F>
Result<GpuBuffer<D, T>> gpuZipWith(const GpuBuffer<D, T>& a, const GpuBuffer<D, T>& b, F f) {
  OSPREY_CHECK(checkSameLength("zipWith", a.size(), b.size()));
  return detail::buildChecked<T>(a.device(), a.size(), ZipKernel<F, ViewOf<T>>{a.view(), b.view(), f});
}

// Left fold in element order: f(...f(seed, x[0])..., x[n-1]).
template <class D, class T, Combine<KernelScalar<D>> F>
Result<Scalar> gpuFold(const GpuBuffer<D, T>& x, Scalar seed, F f) {
  if (!x.device()) return seed;  // an empty default-constructed buffer
  return x.device()->fold(x.view(), seed, f);
}

// Smallest i with x[i] == value, else x.size().
template <class D, class T>
Result<Index> gpuIndexOf(const GpuBuffer<D, T>& x, Scalar value) {
  if (!x.device()) return Index{0};
  return x.device()->indexOf(x.view(), value);
}

// Row-major (rows x inner) * (inner x cols); each output accumulated in k order from 0.0.
template <class D>
Result<GpuBuffer<D>> gpuMatMul(const GpuBuffer<D>& a, const GpuBuffer<D>& b, Index rows, Index inner,
                               Index cols) {
  OSPREY_CHECK(checkMatMulShapes(a.size(), b.size(), rows, inner, cols));
  const auto& dev = a.device() ? a.device() : b.device();
  if (!dev) return Error{"matMul: operands have no device"};
  auto out = OSPREY_TRY(gpuAllocate(dev, rows * cols));
  OSPREY_CHECK(dev->matMul(out.data(), a.view(), b.view(), rows, inner, cols));
  return out;
}

// Element i, read back to the host.
template <class D, class T>
Result<Scalar> gpuGet(const GpuBuffer<D, T>& x, Index i) {
  if (i < 0 || i >= x.size())
    return Error{fmt::format("get: index out of range: {} not below length {}", i, x.size())};
  return x.device()->readOne(x.data() + i);
}

// All elements, back on the host as Scalars (a buffer of narrower storage is widened there).
template <class D, class T>
Result<std::vector<Scalar>> fromGpu(const GpuBuffer<D, T>& x) {
  if constexpr (std::is_same_v<T, Scalar>) {
    std::vector<Scalar> out(static_cast<std::size_t>(x.size()));
    if (x.size() > 0) OSPREY_CHECK(x.device()->download(out.data(), x.data(), x.size()));
    return out;
  } else {
    std::vector<T> stored(static_cast<std::size_t>(x.size()));
    if (x.size() > 0) OSPREY_CHECK(x.device()->download(stored.data(), x.data(), x.size()));
    return std::vector<Scalar>(stored.begin(), stored.end());
  }
}

// One named tensor of a checkpoint, placed on the device as T.
template <class T = Scalar, class D>
Result<GpuBuffer<D, T>> gpuLoadTensor(const std::shared_ptr<D>& dev, const std::string& path,
                                      const std::string& name) {
  auto t = OSPREY_TRY(io::readTensor(path, name));
  return toGpu<T>(dev, std::span<const Scalar>(t.values));
}

// Element i read back as a Scalar, for a handler's get (DESIGN.md §2: it returns a plain Scalar):
// an index outside the buffer is the strict Bounds fault, and a failed read-back throws
// DeviceFailure, which `strictly` and the boundary turn into an Error.
template <class D, class T>
Scalar gpuElementOrFault(const GpuBuffer<D, T>& b, Index i) {
  if (i < 0 || i >= b.size()) fault(FaultKind::Bounds, i, b.size());
  auto r = gpuGet(b, i);
  if (!r.ok()) throw DeviceFailure(r.error().message);
  return *r;
}

// Who answers: "host", "cuda: NVIDIA H200".
template <class D>
std::string gpuDevice(const std::shared_ptr<D>& dev) {
  return dev->name();
}

}  // namespace osprey
