// Gpu<D>: the gpu handler, answering the effect with the GPU surface on device runtime D, which
// must be a DeviceRuntime (device_runtime.hpp): a device lacking a member is told which.
//
// Gpu<D, E> stores its elements as E (double for the exact handlers), which D must hold
// (DeviceStorage); the fast handler (gpu/cuda/fast.hpp) is Gpu<CudaDevice, float> with its own
// products and row folds in place of the exact ones.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "osprey/block_layout.hpp"
#include "osprey/effect.hpp"
#include "osprey/gpu/device_runtime.hpp"
#include "osprey/gpu/surface.hpp"
#include "osprey/several.hpp"
#include "osprey/shape_check.hpp"
#include "osprey/transposed.hpp"

namespace osprey {

template <DeviceRuntime D, class E = Scalar>
  requires DeviceStorage<D, E>
class Gpu {
 public:
  using Buffer = GpuBuffer<D, E>;
  // What kernels take and return: the device's traced types where it traces them (opencl).
  using KernelIndex = osprey::KernelIndex<D>;
  using KernelScalar = osprey::KernelScalar<D>;

  explicit Gpu(std::shared_ptr<D> device) : m_device(std::move(device)) {}

  template <Kernel<KernelIndex, KernelScalar> K>
  Result<Buffer> build(Index n, K kernel) {
    return detail::buildChecked<E>(m_device, n, kernel);
  }
  Scalar get(const Buffer& b, Index i) { return gpuElementOrFault(b, i); }
  Index length(const Buffer& b) { return b.size(); }
  template <Combine<KernelScalar> C>
  Result<Buffer> zipWith(const Buffer& a, const Buffer& b, C combine) {
    return gpuZipWith(a, b, combine);
  }
  template <Combine<KernelScalar> C>
  Result<Scalar> reduce(const Buffer& b, Scalar seed, C combine) {
    return gpuFold(b, seed, combine);
  }
  Result<Index> indexOf(const Buffer& b, Scalar x) { return gpuIndexOf(b, x); }
  Result<Buffer> matMul(const Buffer& a, const Buffer& b, Index rows, Index inner, Index cols) {
    return gpuMatMul(a, b, rows, inner, cols);
  }
  Result<Buffer> fromList(std::span<const Scalar> xs) { return toGpu<E>(m_device, xs); }

  // K buffers of n elements from one kernel (several.hpp): one pass over the index space, where K
  // builds would each read the kernel's inputs again. Only where the buffers hold doubles: with a
  // narrower storage type an output would be used unrounded by the outputs computed from it, which
  // K builds reading it back would not do.
  // (Not on a device that traces its kernels: a traced kernel has one value.)
  template <int K, class F>
    requires KernelOfSeveral<F, K> && std::is_same_v<E, Scalar> && std::is_same_v<KernelIndex, Index>
  Result<std::array<Buffer, K>> buildEach(Index n, F kernel) {
    std::array<Buffer, K> out;
    BuildEachBody<F, K, E> body{{}, kernel};
    for (int j = 0; j < K; ++j) {
      out[j] = OSPREY_TRY(gpuAllocate<E>(m_device, n));
      body.out[j] = out[j].data();
    }
    OSPREY_CHECK(m_device->forEach(n, body));
    return out;
  }

  // `batch` products of one shape stored one after another (a model's per-head products),
  // answered by the device where it launches them together (cuda).
  Result<Buffer> matMulBatched(const Buffer& a, const Buffer& b, Index batch, Index rows, Index inner, Index cols)
    requires requires(D& d, Scalar* out, View v, Index n) { d.matMulBatched(out, v, v, n, n, n, n); }
  {
    const Index n = OSPREY_TRY(checkBatchedMatMulShapes(a.size(), b.size(), batch, rows, inner, cols));
    auto out = OSPREY_TRY(gpuAllocate<E>(m_device, n));
    OSPREY_CHECK(m_device->matMulBatched(out.data(), a.view(), b.view(), batch, rows, inner, cols));
    return out;
  }

  // out (rows, cols) with one operand held transposed (osprey/transposed.hpp): the bits of the
  // product of the transposed copy, answered by the device where it reads the held layout (host and
  // cuda).
  Result<Buffer> matMulTransposed(const Buffer& a, const Buffer& b, Index rows, Index inner, Index cols,
                                  Transposed layout)
    requires std::is_same_v<E, Scalar> &&
             requires(D& d, Scalar* out, View v, Index n, Transposed t) { d.matMulTransposed(out, v, v, n, n, n, t); }
  {
    const Index n = OSPREY_TRY(checkBatchedMatMulShapes(a.size(), b.size(), 1, rows, inner, cols));
    auto out = OSPREY_TRY(gpuAllocate<E>(m_device, n));
    OSPREY_CHECK(m_device->matMulTransposed(out.data(), a.view(), b.view(), rows, inner, cols, layout));
    return out;
  }

  // out (blocks, rows, cols), row-major: element (z, r, c) is src[layout.at(z, r, c)] (a transpose,
  // attention's heads), answered by the device where it has a tiled copy (cuda).
  Result<Buffer> copyBlocks(const Buffer& src, const BlockLayout& layout, Index blocks, Index rows, Index cols)
    requires requires(D& d, E* out, ViewOf<E> v, BlockLayout l, Index n) { d.copyBlocks(out, v, l, n, n, n); }
  {
    OSPREY_CHECK(checkBlockLayout(layout, src.size(), blocks, rows, cols));
    Index n = 0;
    if (__builtin_mul_overflow(blocks, rows, &n) || __builtin_mul_overflow(n, cols, &n))
      return Error{fmt::format("copyBlocks: {} blocks of {} x {} elements overflow an index", blocks, rows, cols)};
    auto out = OSPREY_TRY(gpuAllocate<E>(m_device, n));
    OSPREY_CHECK(m_device->copyBlocks(out.data(), src.view(), layout, blocks, rows, cols));
    return out;
  }

  // Row folds, out[r] = finish(r, the in-order fold of term(r, c) over row r's length(r) columns)
  // (a model's per-row statistics and column sums), answered by the device where it has its own
  // kernel for them (cuda); elsewhere this member does not exist and the caller's reference
  // definition runs.
  template <class L, class T, class C, class F>
    requires requires(D& d, Scalar* out, Index n, L l, Scalar s, bool b, T t, C c, F f) {
      d.foldRows(out, n, l, s, b, t, c, f);
    }
  Result<Buffer> foldRows(Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish) {
    auto out = OSPREY_TRY(gpuAllocate<E>(m_device, rows));
    OSPREY_CHECK(m_device->foldRows(out.data(), rows, length, seed, fromFirst, term, combine, finish));
    return out;
  }
  Result<Buffer> load(const std::string& path, const std::string& name) {
    return gpuLoadTensor<E>(m_device, path, name);
  }
  std::string device() const { return gpuDevice(m_device); }

  const std::shared_ptr<D>& runtime() const { return m_device; }

 protected:
  std::shared_ptr<D> m_device;
};

}  // namespace osprey
