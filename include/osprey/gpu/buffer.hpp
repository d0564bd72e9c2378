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

template <class D>
class GpuBuffer {
 public:
  GpuBuffer() = default;
  GpuBuffer(std::shared_ptr<D> device, Scalar* data, Index n)
      : m_device(device),
        m_memory(data, [device](Scalar* p) { device->release(p); }),
        m_n(n) {}

  View view() const { return View{m_memory.get(), m_n}; }
  Scalar* data() const { return m_memory.get(); }
  Index size() const { return m_n; }
  const std::shared_ptr<D>& device() const { return m_device; }

 private:
  std::shared_ptr<D> m_device;
  std::shared_ptr<Scalar> m_memory;
  Index m_n = 0;
};

// out[i] = kernel(i): what build launches on every device.
template <class K>
struct BuildBody {
  Scalar* out;
  K kernel;
  OSPREY_FN void operator()(Index i) const { out[i] = kernel(i); }
};

// f(a[i])
template <class F>
struct MapKernel {
  View a;
  F f;
  OSPREY_FN Scalar operator()(Index i) const { return f(a[i]); }
};

// f(a[i], b[i])
template <class F>
struct ZipKernel {
  View a, b;
  F f;
  OSPREY_FN Scalar operator()(Index i) const { return f(a[i], b[i]); }
};

// i
struct IotaKernel {
  OSPREY_FN Scalar operator()(Index i) const { return static_cast<Scalar>(i); }
};

}  // namespace osprey
