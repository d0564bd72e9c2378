// bf16 copies of a model's product weights for decoding. Batch-1 decoding reads every weight once
// a token, so its speed is the weights' bytes over the memory's bandwidth: read as bf16, half the
// bytes. The copies are the weights' bf16 twins (fast/bf16_twins.hpp), the ones the bf16
// products of prefill and training read: made when a continuation starts unless a product has
// made them already (FastHandler::halveWeights), and kept while the weights live. The float
// weights stay the model; prefill and training always read them.
//
// Rounding each weight to bf16 (8 significant bits, nearest even) moves the logits by about 2^-8
// of their size per product; docs/FAST.md gives the bound and tests/cuda/fast_test.cu enforces it.
// nvcc units only.
#pragma once

#include <memory>

namespace gpt2::fast_parts {

// What a continuation's one-row products read: bf16 copies of the product weights (the default),
// or the float weights themselves.
enum class DecodeWeights { Bf16, Float };

class HalfWeights;

// The handler's choice of decoding weights, and whether bf16 copies are in use now.
class DecodeWeightCopies {
 public:
  void set(DecodeWeights weights) { m_weights = weights; }
  bool halves() const { return m_weights == DecodeWeights::Bf16; }
  // Whether one-row products read the weights' bf16 twins now: while a HalfWeights lives.
  bool inUse() const { return m_inUse != nullptr; }
  // Puts the copies in use until the returned object is gone (not while they are in use).
  std::unique_ptr<HalfWeights> use();

 private:
  friend class HalfWeights;
  DecodeWeights m_weights = DecodeWeights::Bf16;
  const HalfWeights* m_inUse = nullptr;
};

// While one lives, one-row products read the weights' bf16 twins, which the handler made sure of
// before it made this; the float weights must not change meanwhile: a continuation holds both.
class HalfWeights {
 public:
  explicit HalfWeights(DecodeWeightCopies& copies) : m_copies(copies) {}
  HalfWeights(const HalfWeights&) = delete;
  HalfWeights& operator=(const HalfWeights&) = delete;
  ~HalfWeights() {
    if (m_copies.m_inUse == this) m_copies.m_inUse = nullptr;
  }

 private:
  DecodeWeightCopies& m_copies;
};

inline std::unique_ptr<HalfWeights> DecodeWeightCopies::use() {
  auto half = std::make_unique<HalfWeights>(*this);
  m_inUse = half.get();
  return half;
}

}  // namespace gpt2::fast_parts
