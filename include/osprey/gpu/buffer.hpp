// GpuBuffer<Device>: device memory owned by a shared handle, plus the kernel bodies every device
// runtime launches. What a runtime must provide is the DeviceRuntime concept
// (device_runtime.hpp); a buffer itself asks only that it take its memory back (device::Release).
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "osprey/config.hpp"
#include "osprey/gpu/device_runtime.hpp"
#include "osprey/several.hpp"
#include "osprey/view.hpp"

namespace osprey {

// T is the element storage: Scalar (double) for the exact handlers, float for the fast handler
// (gpu/cuda/fast.hpp), any other type a handler keeps on the side. Kernels read every element as a
// Scalar through ViewOf<T>.
template <class D, class T = Scalar>
  requires device::Release<D, T>
class GpuBuffer {
 public:
  using Element = T;

  GpuBuffer() = default;
  GpuBuffer(std::shared_ptr<D> device, T* data, Index n)
      : m_device(device),
        m_memory(data, [device](T* p) { device->release(p); }),
        m_n(n) {}

  // A buffer of n elements that takes no memory until they are first read: the first view() or
  // data() (of this buffer, a copy or a part) calls make(), which allocates the block and fills it
  // with the values the buffer holds, and returns it (released with the last copy, as any
  // buffer's block). A handler that keeps some outputs in a narrower copy for its own kernels
  // makes their full elements this way, so they are neither stored nor written unless something
  // else reads them.
  // make() returns null where it could not allocate (having said why): the reads then see no
  // memory, and the device's copy or kernel reports the null address.
  static GpuBuffer later(std::shared_ptr<D> device, Index n, std::function<T*()> make) {
    auto pending = std::make_shared<Later>(device, std::move(make));
    GpuBuffer b;
    b.m_device = std::move(device);
    // Until the block exists, the buffer is told apart from others by an address no other live
    // buffer has: its pending state's own.
    b.m_memory = std::shared_ptr<T>(pending, reinterpret_cast<T*>(pending.get()));
    b.m_n = n;
    b.m_later = std::move(pending);
    return b;
  }

  // A buffer over memory the device did not allocate (raw_pointer.hpp's bufFromRawDevicePtr):
  // `memory`'s own deleter, never the device's release, runs when the last copy or part is gone.
  static GpuBuffer borrowing(std::shared_ptr<D> device, std::shared_ptr<T> memory, Index n) {
    GpuBuffer b;
    b.m_device = std::move(device);
    b.m_memory = std::move(memory);
    b.m_n = n;
    return b;
  }

  // Both hand out the elements: a buffer made later() gets them first.
  ViewOf<T> view() const { return ViewOf<T>{data(), m_n}; }
  T* data() const {
    if (!m_later) return m_memory.get();
    T* block = m_later->made();
    return block ? block + m_offset : nullptr;
  }
  // Where the elements live, or (made later() and not yet read) where the buffer is told apart
  // by: for telling buffers apart, never for reading them.
  const T* address() const { return m_memory.get(); }
  Index size() const { return m_n; }
  // Made later() and not yet read.
  bool deferred() const { return m_later && !m_later->block(); }
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
    b.m_offset = m_offset + from;
    return b;
  }

 private:
  // A later() block: made on the first read, by the first copy that reads it.
  class Later {
   public:
    Later(std::shared_ptr<D> device, std::function<T*()> make) : m_device(std::move(device)), m_make(std::move(make)) {}
    ~Later() {
      if (m_block) m_device->release(m_block);
    }
    Later(const Later&) = delete;
    Later& operator=(const Later&) = delete;
    // The block, made now if it is not yet.
    T* made() {
      if (m_make) m_block = std::exchange(m_make, nullptr)();
      return m_block;
    }
    // The block if it is made, else null.
    T* block() const { return m_block; }

   private:
    std::shared_ptr<D> m_device;
    std::function<T*()> m_make;
    T* m_block = nullptr;
  };

  std::shared_ptr<D> m_device;
  std::shared_ptr<T> m_memory;
  Index m_n = 0;
  std::shared_ptr<Later> m_later;  // later() buffers: shared by copies and parts
  Index m_offset = 0;              // where a part of a later() block starts in it
};

// out[i] = kernel(i), rounded once to the storage type: what build launches on every device.
template <class K, class T = Scalar>
struct BuildBody {
  T* out;
  K kernel;
  OSPREY_FN void operator()(Index i) const { out[i] = static_cast<T>(kernel(i)); }
};

// out[j][i] = kernel(i).v[j] for each of the K outputs, each rounded once to the storage type:
// what buildEach launches.
template <class K, int N, class T = Scalar>
struct BuildEachBody {
  T* out[N];
  K kernel;
  OSPREY_FN void operator()(Index i) const {
    const Several<N> values = kernel(i);
    for (int j = 0; j < N; ++j) out[j][i] = static_cast<T>(values.v[j]);
  }
};

// f(a[i])
template <class F, class V = View>
struct MapKernel {
  V a;
  F f;
  template <class I>
  OSPREY_FN auto operator()(I i) const {
    return f(a[i]);
  }
};

// f(a[i], b[i])
template <class F, class V = View>
struct ZipKernel {
  V a, b;
  F f;
  template <class I>
  OSPREY_FN auto operator()(I i) const {
    return f(a[i], b[i]);
  }
};

// i
struct IotaKernel {
  template <class I>
  OSPREY_FN auto operator()(I i) const {
    return toScalar(i);
  }
};

}  // namespace osprey
