// bf16 copies of a model's product weights for decoding. Batch-1 decoding reads every weight once
// a token, so its speed is the weights' bytes over the memory's bandwidth: read as bf16, half the
// bytes. The copies are the weights' bf16 twins (fast/bf16_twins.hpp), the ones the bf16
// products of prefill and training read: made when a continuation starts unless a product has
// made them already, and kept while the weights live. The float weights stay the model.
//
// Rounding each weight to bf16 (8 significant bits, nearest even) moves the logits by about 2^-8
// of their size per product; docs/FAST.md gives the bound and tests/cuda/fast_test.cu enforces it.
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/half_weights.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

// While one lives it is the handler's (m_halfWeights), and one-row products read the weights'
// bf16 twins, which halveWeights made sure of; the float weights must not change meanwhile: a
// continuation holds both.
class FastHandler::HalfWeights {
 public:
  explicit HalfWeights(FastHandler& h) : m_handler(h) {}
  HalfWeights(const HalfWeights&) = delete;
  HalfWeights& operator=(const HalfWeights&) = delete;
  ~HalfWeights() {
    if (m_handler.m_halfWeights == this) m_handler.m_halfWeights = nullptr;
  }

 private:
  FastHandler& m_handler;
};

template <class Weights>
osprey::Result<std::unique_ptr<FastHandler::HalfWeights>> FastHandler::halveWeights(const Weights& w) {
  static_assert(std::is_same_v<Weights, ForwardWeights<FastHandler>>);
  if (m_halfWeights) return osprey::Error{"decoding: bf16 weight copies are already in use"};
  // Each weight's twin: made now unless a product has made it, kept while the weight lives.
  for (const BlockForwardWeights<FastHandler>& b : w.blocks)
    for (const Buffer* m : {&b.attnT, &b.attnProjT, &b.fcT, &b.fcProjT}) (void)OSPREY_TRY(twinOf(*m, m->size()));
  (void)OSPREY_TRY(twinOf(w.wte, w.wte.size()));
  auto half = std::make_unique<HalfWeights>(*this);
  m_halfWeights = half.get();
  return std::move(half);
}

inline const __nv_bfloat16* FastHandler::halfOf(const Buffer& w) const {
  return m_halfWeights ? madeTwin(w, w.size()) : nullptr;
}

}  // namespace gpt2
