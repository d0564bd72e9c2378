// bf16 copies of a model's product weights for decoding. Batch-1 decoding reads every weight once
// a token, so its speed is the weights' bytes over the memory's bandwidth: read as bf16, half the
// bytes. The copies are made once, when a continuation starts, and live as long as it does; the
// float weights stay the model (prefill, training and checkpoints read only them).
//
// Rounding each weight to bf16 (8 significant bits, nearest even) moves the logits by about 2^-9
// of their size per product; docs/FAST.md gives the bound and tests/cuda/fast_test.cu enforces it.
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/half_weights.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

// The copies, found by the float weight's address. While one lives it is the handler's
// (m_halfWeights), and the float weights it copied must not change: a continuation holds both.
class FastHandler::HalfWeights {
 public:
  explicit HalfWeights(FastHandler& h) : m_handler(h) {}
  HalfWeights(const HalfWeights&) = delete;
  HalfWeights& operator=(const HalfWeights&) = delete;
  ~HalfWeights() {
    if (m_handler.m_halfWeights == this) m_handler.m_halfWeights = nullptr;
  }

  // A bf16 copy of w, rounded on the handler's stream.
  osprey::Result<void> add(const Buffer& w) {
    auto device = m_handler.m_device;
    __nv_bfloat16* copy = OSPREY_TRY(device->allocate<__nv_bfloat16>(w.size()));
    osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16> held(device, copy, w.size());
    constexpr int threads = 256;
    const auto blocks = static_cast<unsigned>(std::min<osprey::Index>((w.size() + threads - 1) / threads, 4096));
    fast_kernels::roundToBf16<<<blocks, threads, 0, m_handler.stream()>>>(copy, w.data(), w.size());
    OSPREY_CHECK(fast_detail::launched("fast bf16 weight copy launch"));
    m_copies.emplace_back(w.data(), std::move(held));
    return {};
  }
  const __nv_bfloat16* find(const float* w) const {
    for (const auto& [from, copy] : m_copies)
      if (from == w) return copy.data();
    return nullptr;
  }

 private:
  FastHandler& m_handler;
  std::vector<std::pair<const float*, osprey::GpuBuffer<osprey::CudaDevice, __nv_bfloat16>>> m_copies;
};

template <class Weights>
osprey::Result<std::unique_ptr<FastHandler::HalfWeights>> FastHandler::halveWeights(const Weights& w) {
  static_assert(std::is_same_v<Weights, ForwardWeights<FastHandler>>);
  if (m_halfWeights) return osprey::Error{"decoding: bf16 weight copies are already in use"};
  auto half = std::make_unique<HalfWeights>(*this);
  for (const BlockForwardWeights<FastHandler>& b : w.blocks)
    for (const Buffer* m : {&b.attnT, &b.attnProjT, &b.fcT, &b.fcProjT}) OSPREY_CHECK(half->add(*m));
  OSPREY_CHECK(half->add(w.wte));
  m_halfWeights = half.get();
  return std::move(half);
}

inline const __nv_bfloat16* FastHandler::halfOf(const Buffer& w) const {
  return m_halfWeights ? m_halfWeights->find(w.data()) : nullptr;
}

}  // namespace gpt2
