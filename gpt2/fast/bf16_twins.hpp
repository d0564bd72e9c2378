// bf16 twins of float buffers: what the linear layers' bf16 products read. The tensor cores
// multiply bf16 at twice TF32's rate, and an operand of half the bytes is half the traffic; the
// model's buffers stay float (storage, every fused kernel, checkpoints), and a product's operands
// are rounded to bf16 (8 significant bits, nearest even) once per buffer: a weight once a step for
// the forward and backward, an activation once for its forward product and its weight gradient,
// a gradient once for its two backward products.
//
// A twin lives as long as its buffer's memory (fast/kept_beside.hpp): the effect never writes a
// buffer it has handed out, so a twin stays its buffer's rounding. A twin is made by rounding the
// floats (of), or written by the kernel that writes the floats, or instead of them (add: the
// buffer is then stored as its twin, and its floats, made later if at all, are the twin's values).
// nvcc units only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "gpt2/fast/kept_beside.hpp"
#include "gpt2/fast/kernels/twin_copies.hpp"
#include "gpt2/fast/launch_checks.hpp"
#include "osprey/gpu/cuda/fast.hpp"

namespace gpt2::fast_parts {

using HalfBuffer = osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16>;

// A buffer's elements as a kernel reads them (GELU): T bf16 where the buffer is stored as bf16
// (its floats are those values widened, so a kernel reads what it would read from the floats, in
// half the bytes), else float; `held` keeps their memory for as long as a launch, a deferred one
// too, may read them.
template <class T>
struct Elements {
  const T* data;
  std::shared_ptr<const void> held;
};

class Bf16Twins {
 public:
  using Buffer = osprey::Fast::Buffer;
  struct Twin {
    HalfBuffer copy;
    bool stored = false;  // the buffer is stored as this twin: its floats are the twin's values
  };

  explicit Bf16Twins(std::shared_ptr<osprey::CudaDevice> device) : m_device(std::move(device)) {}

  // The bf16 twin of b followed by zeros up to length: made (rounded to nearest even, on the
  // device's stream) the first time it is asked for, then kept until b's memory is released.
  osprey::Result<const __nv_bfloat16*> of(const Buffer& b, osprey::Index length) {
    if (length < b.size())
      return osprey::Error{fmt::format("bf16 twin: {} elements do not hold a buffer of {}", length, b.size())};
    if (const __nv_bfloat16* done = made(b, length)) return done;
    return add(b, length, [&](__nv_bfloat16* copy) -> osprey::Result<void> {
      if (length == 0) return {};
      const osprey::Index groups = (length + 3) / 4;
      const auto blocks = static_cast<unsigned>(std::min<osprey::Index>(
          (groups + fast_kernels::kTwinThreads - 1) / fast_kernels::kTwinThreads, 8 * 1024));
      fast_kernels::bf16Copy<<<blocks, fast_kernels::kTwinThreads, 0, m_device->stream()>>>(copy, b.data(), b.size(),
                                                                                            length);
      OSPREY_CHECK(fast_detail::launched("fast bf16 twin launch"));
      if (m_device->checksEachLaunch()) return m_device->flush();
      return {};
    });
  }
  // The twin of(b, length) would return if it has been made, else null.
  const Twin* find(const Buffer& b, osprey::Index length) const { return m_kept.find(b, length); }
  // That twin's bf16 values, else null.
  const __nv_bfloat16* made(const Buffer& b, osprey::Index length) const {
    const Twin* t = find(b, length);
    return t ? t->copy.data() : nullptr;
  }
  // The memory of b's twin of b's own length where one is made (else empty), shared: what a
  // deferred launch that reads the twin holds, in case it runs after the handler is gone.
  HalfBuffer kept(const Buffer& b) const {
    const Twin* t = find(b, b.size());
    return t ? t->copy : HalfBuffer{};
  }
  // body(Elements<__nv_bfloat16>) where b is stored as its twin, else body(Elements<float>): the
  // output a layer makes from b's elements.
  template <class Body>
  osprey::Result<Buffer> withElements(const Buffer& b, Body body) const {
    if (const Twin* t = find(b, b.size()); t && t->stored)
      return body(Elements<__nv_bfloat16>{t->copy.data(), t->copy.memory()});
    return body(Elements<float>{b.data(), b.memory()});
  }
  // Room for `length` elements as b's twin, filled by write(room), then kept as b's (`stored`: b
  // is stored as it). The twins whose buffers are gone are released first.
  template <class Write>
  osprey::Result<const __nv_bfloat16*> add(const Buffer& b, osprey::Index length, Write write, bool stored = false) {
    m_kept.forgetDead();
    auto device = m_device;
    __nv_bfloat16* room = OSPREY_TRY(device->allocate<__nv_bfloat16>(length));
    HalfBuffer held(device, room, length);
    OSPREY_CHECK(write(room));
    m_kept.add(b, length, Twin{std::move(held), stored});
    return room;
  }

  // out[i] = in[i] widened to float for i < n, on `stream`: the floats of a buffer stored as bf16.
  static cudaError_t widen(cudaStream_t stream, float* out, const __nv_bfloat16* in, osprey::Index n) {
    if (n == 0) return cudaSuccess;
    const auto blocks = static_cast<unsigned>(
        std::min<osprey::Index>((n + fast_kernels::kTwinThreads - 1) / fast_kernels::kTwinThreads, 8 * 1024));
    fast_kernels::floatsOfHalves<<<blocks, fast_kernels::kTwinThreads, 0, stream>>>(out, in, n);
    return cudaGetLastError();
  }

 private:
  std::shared_ptr<osprey::CudaDevice> m_device;
  KeptBeside<Twin> m_kept;
};

}  // namespace gpt2::fast_parts
