// bf16 twins of float buffers: what the linear layers' bf16 products read. The tensor cores
// multiply bf16 at twice TF32's rate, and an operand of half the bytes is half the traffic; the
// model's buffers stay float (storage, every fused kernel, checkpoints), and a product's operands
// are rounded to bf16 (8 significant bits, nearest even) once per buffer: a weight once a step for
// the forward and backward, an activation once for its forward product and its weight gradient,
// a gradient once for its two backward products.
//
// A twin lives as long as its buffer's memory: the handler keeps it beside a weak reference to
// that memory and releases it once the memory is gone. The effect never writes a buffer it has
// handed out, so a twin stays its buffer's rounding.
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/bf16_twins.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

namespace fast_kernels {

constexpr int kTwinThreads = 256;

namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// out[i] = in[i] rounded to bf16 (nearest even) for i < n, then zeros up to `length`: four
// elements a thread, read as one float4 where in is 16-byte aligned and written as two bf16 pairs.
__global__ void __launch_bounds__(kTwinThreads) bf16Copy(__nv_bfloat16* out, const float* in, osprey::Index n,
                                                         osprey::Index length) {
  const bool aligned = alignedTo(in, 16);
  const osprey::Index step = static_cast<osprey::Index>(gridDim.x) * blockDim.x * 4;
  for (osprey::Index i = (static_cast<osprey::Index>(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < length;
       i += step) {
    float4 q;
    if (aligned && i + 4 <= n) {
      q = __ldcs(reinterpret_cast<const float4*>(in + i));
    } else {
      float v[4];
      for (int k = 0; k < 4; ++k) v[k] = i + k < n ? in[i + k] : 0.0f;
      q = make_float4(v[0], v[1], v[2], v[3]);
    }
    if (i + 4 <= length) {  // out is the start of an allocation: 8-byte aligned at every i
      storeBf16Four(out + i, q);
    } else {
      const float v[4] = {q.x, q.y, q.z, q.w};
      for (int k = 0; i + k < length; ++k) out[i + k] = __float2bfloat16_rn(v[k]);
    }
  }
}

// out[i] = in[i] widened to float, for i < n: the floats of a buffer stored as bf16.
__global__ void __launch_bounds__(kTwinThreads) floatsOfHalves(float* out, const __nv_bfloat16* in,
                                                               osprey::Index n) {
  const osprey::Index step = static_cast<osprey::Index>(gridDim.x) * blockDim.x;
  for (osprey::Index i = static_cast<osprey::Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = __bfloat162float(in[i]);
}

}  // namespace
}  // namespace fast_kernels

inline cudaError_t FastHandler::widen(cudaStream_t stream, float* out, const __nv_bfloat16* in, osprey::Index n) {
  if (n == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(
      std::min<osprey::Index>((n + fast_kernels::kTwinThreads - 1) / fast_kernels::kTwinThreads, 8 * 1024));
  fast_kernels::floatsOfHalves<<<blocks, fast_kernels::kTwinThreads, 0, stream>>>(out, in, n);
  return cudaGetLastError();
}

inline void FastHandler::forgetDeadTwins() {
  std::erase_if(m_twins, [](const Twin& t) { return t.source.expired(); });
}

inline const FastHandler::Twin* FastHandler::foundTwin(const Buffer& b, osprey::Index length) const {
  for (const Twin& t : m_twins)
    if (t.length == length && fast_detail::sameBuffer(t.source, t.data, t.n, b)) return &t;
  return nullptr;
}

inline const __nv_bfloat16* FastHandler::madeTwin(const Buffer& b, osprey::Index length) const {
  const Twin* t = foundTwin(b, length);
  return t ? t->copy.data() : nullptr;
}

template <class Body>
osprey::Result<FastHandler::Buffer> FastHandler::withElements(const Buffer& b, Body body) {
  if (const Twin* t = foundTwin(b, b.size()); t && t->stored)
    return body(Elements<__nv_bfloat16>{t->copy.data(), t->copy.memory()});
  return body(Elements<float>{b.data(), b.memory()});
}

inline FastHandler::HalfBuffer FastHandler::keptTwin(const Buffer& b) const {
  const Twin* t = foundTwin(b, b.size());
  return t ? t->copy : HalfBuffer{};
}

template <class Write>
osprey::Result<const __nv_bfloat16*> FastHandler::newTwin(const Buffer& b, osprey::Index length, Write write,
                                                          bool stored) {
  forgetDeadTwins();
  auto device = m_device;
  __nv_bfloat16* room = OSPREY_TRY(device->allocate<__nv_bfloat16>(length));
  HalfBuffer held(device, room, length);
  OSPREY_CHECK(write(room));
  m_twins.push_back(Twin{b.memory(), b.address(), b.size(), length, std::move(held), stored});
  return room;
}

inline osprey::Result<const __nv_bfloat16*> FastHandler::twinOf(const Buffer& b, osprey::Index length) {
  if (length < b.size())
    return osprey::Error{fmt::format("bf16 twin: {} elements do not hold a buffer of {}", length, b.size())};
  if (const __nv_bfloat16* made = madeTwin(b, length)) return made;
  return newTwin(b, length, [&](__nv_bfloat16* copy) -> osprey::Result<void> {
    if (length == 0) return {};
    const osprey::Index groups = (length + 3) / 4;
    const auto blocks = static_cast<unsigned>(std::min<osprey::Index>(
        (groups + fast_kernels::kTwinThreads - 1) / fast_kernels::kTwinThreads, 8 * 1024));
    fast_kernels::bf16Copy<<<blocks, fast_kernels::kTwinThreads, 0, stream()>>>(copy, b.data(), b.size(), length);
    OSPREY_CHECK(fast_detail::launched("fast bf16 twin launch"));
    if (m_device->checksEachLaunch()) return m_device->flush();
    return {};
  });
}

template <class Write>
osprey::Result<void> FastHandler::withTwin(const Buffer& out, Write write) {
  if (m_products != Products::Bf16) return write(static_cast<__nv_bfloat16*>(nullptr));
  (void)OSPREY_TRY(newTwin(out, out.size(), write));
  return {};
}

template <class Fill>
FastHandler::Buffer FastHandler::floatsLater(osprey::Index n, Fill fill) {
  return Buffer::later(m_device, n, [fill, n, device = m_device, written = m_deferredWritten]() mutable -> float* {
    auto block = device->allocate<float>(n);
    if (!block.ok()) {
      std::fprintf(stderr, "osprey fast: no device memory for the %lld floats of an output stored as bf16: %s\n",
                   static_cast<long long>(n), block.error().message.c_str());
      return nullptr;
    }
    ++*written;
    fill(device->stream(), *block);
    return *block;
  });
}

template <class Launch>
osprey::Result<FastHandler::Buffer> FastHandler::twinOnly(osprey::Index n, Launch launch) {
  if (!storesHalves() || n == 0) {
    auto out = OSPREY_TRY(allocate(n));
    OSPREY_CHECK(withTwin(out, [&](__nv_bfloat16* twin) { return launch(stream(), out.data(), twin); }));
    return out;
  }
  // The floats' block and their launch come when something reads them: `launch` holds its
  // operands (and so the launch the same floats), and the buffer holds `launch`, the one the twin
  // is written by below (a launch may note what its first run wrote, as the LayerNorm's does).
  auto held = std::make_shared<Launch>(std::move(launch));
  auto later = floatsLater(n, [held](cudaStream_t stream, float* floats) {
    // The launch ran once already with this grid (for the twin), so it cannot be refused now; a
    // fault of the device stays sticky and the next checked call reports it.
    (void)(*held)(stream, floats, nullptr);
  });
  (void)OSPREY_TRY(newTwin(later, n, [&](__nv_bfloat16* twin) { return (*held)(stream(), nullptr, twin); }));
  return later;
}

template <class E>
osprey::Result<FastHandler::Held<E>> FastHandler::operandOf(const Buffer& b, osprey::Index length) {
  const osprey::Index n = std::max(length, b.size());
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    return Held<E>{OSPREY_TRY(twinOf(b, n)), Buffer{}};
  } else {
    if (n == b.size()) return Held<E>{b.data(), Buffer{}};
    auto wide = OSPREY_TRY(allocate(n));
    OSPREY_CUDA_CHECK(cudaMemcpyAsync(wide.data(), b.data(), static_cast<std::size_t>(b.size()) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream()),
                      "copying an operand to its padded length");
    OSPREY_CUDA_CHECK(cudaMemsetAsync(wide.data() + b.size(), 0, static_cast<std::size_t>(n - b.size()) * sizeof(float),
                                      stream()),
                      "zeroing an operand's padding");
    const float* data = wide.data();
    return Held<E>{data, std::move(wide)};
  }
}

}  // namespace gpt2
