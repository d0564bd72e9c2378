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

#include <functional>
#include <memory>
#include <utility>

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

  // Both hand out the elements, so both compute them first where they are deferred (defer).
  ViewOf<T> view() const {
    settle();
    return ViewOf<T>{m_memory.get(), m_n};
  }
  T* data() const {
    settle();
    return m_memory.get();
  }
  // Where the elements live, without computing deferred ones: for telling buffers apart, never
  // for reading them.
  const T* address() const { return m_memory.get(); }
  Index size() const { return m_n; }

  // Elements computed only when they are first read: `write` fills this buffer's memory (the
  // same values it would have written at once) the first time view() or data() is asked for, of
  // this buffer, a copy or a part. The fast handler defers the floats of outputs that its own
  // layers read only as bf16 copies (examples/gpt2/fast/bf16_twins.hpp), so the floats of a
  // training step's LayerNorm and GELU outputs are never written unless something else reads
  // them. Set once, on a buffer not yet handed out (copies made before it do not share it); a
  // write's launch failure stays on the device and is reported by the next checked launch.
  void defer(std::function<void()> write) {
    m_pending = std::make_shared<std::function<void()>>(std::move(write));
  }
  bool deferred() const { return m_pending && *m_pending; }
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
  void settle() const {
    if (m_pending && *m_pending) std::exchange(*m_pending, nullptr)();
  }

  std::shared_ptr<D> m_device;
  std::shared_ptr<T> m_memory;
  Index m_n = 0;
  std::shared_ptr<std::function<void()>> m_pending;  // shared by copies and parts
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
