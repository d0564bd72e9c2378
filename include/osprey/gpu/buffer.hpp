// GpuBuffer<Device>: device memory owned by a shared handle, plus the kernel bodies every device
// runtime launches. Device runtimes (host.hpp, cuda.hpp) mirror each other member for member:
//
//   static Result<std::shared_ptr<D>> open()          the device, or why it cannot be had
//   std::string name() const                          "host", "cuda: NVIDIA H200"
//   Result<Scalar*> allocate(Index n) / release(p)    device memory
//   Result<void> upload(dst, src, n) / download(...)  host <-> device copies
//   Result<void> forEach(n, body)                     body(i) for every i, in parallel
//   Result<Scalar> fold(view, seed, combine)          left fold in element order
//   Result<Index> indexOf(view, x)                    smallest matching index, else n
//   Result<void> matMul(out, a, b, rows, inner, cols) exact product, k order from 0.0
#pragma once

#include <memory>

#include "osprey/config.hpp"
#include "osprey/view.hpp"

namespace osprey {

// T is the element storage: Scalar (double) for the exact handlers, float for the fast handler
// (gpu/fast.hpp). Kernels read every element as a Scalar through ViewOf<T>.
template <class D, class T = Scalar>
class GpuBuffer {
 public:
  using Element = T;

  GpuBuffer() = default;
  GpuBuffer(std::shared_ptr<D> device, T* data, Index n)
      : m_device(device),
        m_memory(data, [device](T* p) { device->release(p); }),
        m_n(n) {}

  ViewOf<T> view() const { return ViewOf<T>{m_memory.get(), m_n}; }
  T* data() const { return m_memory.get(); }
  Index size() const { return m_n; }
  const std::shared_ptr<D>& device() const { return m_device; }
  // The shared handle of its memory: whether a buffer still is the one something was made from
  // (the same block, not a later one at the same address) is a question of this handle's owner,
  // which a std::weak_ptr keeps without keeping the memory.
  const std::shared_ptr<T>& memory() const { return m_memory; }
  // The first n elements (n <= size()), sharing this buffer's memory: a result computed into a
  // larger, padded block and handed out at its own length.
  GpuBuffer prefix(Index n) const { return part(0, n); }
  // The n elements from `offset` (clamped to this buffer), sharing its memory: one block
  // allocated for several buffers, released when the last part is gone.
  GpuBuffer part(Index offset, Index n) const {
    GpuBuffer b(*this);
    const Index from = offset < 0 ? 0 : offset < m_n ? offset : m_n;
    b.m_memory = std::shared_ptr<T>(m_memory, m_memory.get() + from);
    b.m_n = n < m_n - from ? (n < 0 ? 0 : n) : m_n - from;
    return b;
  }

 private:
  std::shared_ptr<D> m_device;
  std::shared_ptr<T> m_memory;
  Index m_n = 0;
};

// out[i] = kernel(i), rounded once to the storage type: what build launches on every device.
template <class K, class T = Scalar>
struct BuildBody {
  T* out;
  K kernel;
  OSPREY_FN void operator()(Index i) const { out[i] = static_cast<T>(kernel(i)); }
};

// f(a[i])
template <class F, class V = View>
struct MapKernel {
  V a;
  F f;
  OSPREY_FN Scalar operator()(Index i) const { return f(a[i]); }
};

// f(a[i], b[i])
template <class F, class V = View>
struct ZipKernel {
  V a, b;
  F f;
  OSPREY_FN Scalar operator()(Index i) const { return f(a[i], b[i]); }
};

// i
struct IotaKernel {
  OSPREY_FN Scalar operator()(Index i) const { return static_cast<Scalar>(i); }
};

}  // namespace osprey
