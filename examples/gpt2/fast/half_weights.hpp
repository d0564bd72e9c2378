// bf16 copies of a model's product weights for decoding. Batch-1 decoding reads every weight once
// a token, so its speed is the weights' bytes over the memory's bandwidth: read as bf16, half the
// bytes. The copies are the weights' bf16 twins (fast/bf16_twins.hpp), the ones the bf16
// products of prefill and training read: made when a continuation starts unless a product has
// made them already, and kept while the weights live. The float weights stay the model.
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

  // w's bf16 twin (fast/bf16_twins.hpp: made now unless a product has made it, kept while w lives).
  osprey::Result<void> add(const Buffer& w) {
    m_copies.emplace_back(w.data(), OSPREY_TRY(m_handler.twinOf(w, w.size())));
    return {};
  }
  const __nv_bfloat16* find(const float* w) const {
    for (const auto& [from, copy] : m_copies)
      if (from == w) return copy;
    return nullptr;
  }

 private:
  FastHandler& m_handler;
  std::vector<std::pair<const float*, const __nv_bfloat16*>> m_copies;
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
