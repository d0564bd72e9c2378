// The GPU surface: a public API of its own, usable without the effect (DESIGN.md §3).
//
//   auto dev = OSPREY_TRY(HostDevice::open());               // or CudaDevice::open()
//   auto x   = OSPREY_TRY(toGpu(dev, std::array{1.0, 2.0, 3.0, 4.0}));
//   auto y   = OSPREY_TRY(gpuMatMul(x, x, 2, 2, 2));         // [[7, 10], [15, 22]]
//   double first = OSPREY_TRY(gpuGet(y, 0));                 // 7
//
// Every function is generic over the device runtime D; the Gpu<D> handler (handler.hpp) answers
// the effect with exactly these calls.
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

template <class D>
Result<GpuBuffer<D>> gpuAllocate(const std::shared_ptr<D>& dev, Index n) {
  if (n < 0) return Error{fmt::format("{}: negative length {}", dev->name(), n)};
  Scalar* p = OSPREY_TRY(dev->allocate(n));
  return GpuBuffer<D>(dev, p, n);
}

// Lift host values onto the device.
template <class D>
Result<GpuBuffer<D>> toGpu(const std::shared_ptr<D>& dev, std::span<const Scalar> xs) {
  auto out = OSPREY_TRY(gpuAllocate(dev, static_cast<Index>(xs.size())));
  OSPREY_CHECK(dev->upload(out.data(), xs.data(), out.size()));
  return out;
}

namespace detail {
// build's body for kernels already checked by the caller's concept. gpuMap and gpuZipWith come
// here: their ZipKernel/MapKernel wrappers hold a checked closure, but under nvcc's host pass an
// extended lambda's wrapper type is not trivially copyable, so the wrapper itself would not pass
// Kernel (only the lambda does, by its trait).
template <class D, class K>
Result<GpuBuffer<D>> buildChecked(const std::shared_ptr<D>& dev, Index n, K kernel) {
  auto out = OSPREY_TRY(gpuAllocate(dev, n));
  OSPREY_CHECK(dev->forEach(n, BuildBody<K>{out.data(), kernel}));
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

// f(a[i], b[i])
template <class D, Combine F>
Result<GpuBuffer<D>> gpuZipWith(const GpuBuffer<D>& a, const GpuBuffer<D>& b, F f) {
  OSPREY_CHECK(checkSameLength("zipWith", a.size(), b.size()));
  return detail::buildChecked(a.device(), a.size(), ZipKernel<F>{a.view(), b.view(), f});
}

// Left fold in element order: f(...f(seed, x[0])..., x[n-1]).
template <class D, Combine F>
Result<Scalar> gpuFold(const GpuBuffer<D>& x, Scalar seed, F f) {
  if (!x.device()) return seed;  // an empty default-constructed buffer
  return x.device()->fold(x.view(), seed, f);
}

// Smallest i with x[i] == value, else x.size().
template <class D>
Result<Index> gpuIndexOf(const GpuBuffer<D>& x, Scalar value) {
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

// One named tensor of a checkpoint, placed on the device.
template <class D>
Result<GpuBuffer<D>> gpuLoadTensor(const std::shared_ptr<D>& dev, const std::string& path,
                                   const std::string& name) {
  auto t = OSPREY_TRY(io::readTensor(path, name));
  return toGpu(dev, std::span<const Scalar>(t.values));
}

// Who answers: "host", "cuda: NVIDIA H200".
template <class D>
std::string gpuDevice(const std::shared_ptr<D>& dev) {
  return dev->name();
}

}  // namespace osprey
