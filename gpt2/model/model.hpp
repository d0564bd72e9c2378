// GPT-2's inference, written once against the Tensor effect: the full pass over a sequence, and
// the one-position step that continues a sequence from its key/value cache. Both are passes of
// the one forward walk (walk.hpp), which training walks too (train/forward.hpp); what is here is
// how inference takes each stage (its weights' layout, its derived operations) and what it keeps.
//
// Dimension legend: see config.hpp (maxT, V, L, NH, C) and layers/common.hpp (B, T, N = B·T,
// Tc = positions held in a cache). Every buffer below carries its shape in a comment.
//
// The layers and their order are the walk's (walk.hpp); inference ends with the tied lm head,
//   logits = ln_f(x) · wteᵀ                                       (N, V)
//
// Layout for the forward pass: the four matrices of each block are held transposed, (OC, IC),
// in ForwardWeights (prepared once per run from the checkpoint's Conv1D (IC, OC) layout). Every
// product is then computed as Wᵀ · xᵀ, whose rows read contiguous memory even when x is a single
// row (the KV-cached step), and which performs, for each output, exactly the chain of x · W:
// acc = fma(x[n][k], W[k][o], acc), k ascending from +0.0 (IEEE products commute). The lm head is
// the same product with wte (V, C), which already is (OC, IC). The products are layers/linear.hpp.
//
// The cached step computes the same rows as the full pass: every layer is row-independent
// except attention, and attentionDecode equals the last row of attentionForward bit for bit
// (layers/attention.hpp); the lm head's outputs are independent dot products in k order. So
// logits from a cache equal the full recomputation's, bit for bit (tests/gpt2/model_typed_tests.hpp:
// CachedLogitsEqualTheFullPassBitForBit).
//
// No line here names a handler or a device; kernels live in named templates with explicit
// return types (DESIGN.md §3, CUDA notes).
#pragma once

#include <utility>
#include <vector>

#include "gpt2/layers/layers.hpp"
#include "gpt2/model/walk.hpp"
#include "gpt2/model/weights.hpp"

namespace gpt2 {

// One block's tensors as the forward pass reads them.
template <osprey::Tensor H>
struct BlockForwardWeights {
  Buf<H> ln1Weight, ln1Bias;    // (C), (C)
  Buf<H> attnT, attnBias;       // (3C, C) = c_attn.weightᵀ, (3C)
  Buf<H> attnProjT, attnProjBias;  // (C, C) = attn.c_proj.weightᵀ, (C)
  Buf<H> ln2Weight, ln2Bias;    // (C), (C)
  Buf<H> fcT, fcBias;           // (4C, C) = c_fc.weightᵀ, (4C)
  Buf<H> fcProjT, fcProjBias;   // (C, 4C) = mlp.c_proj.weightᵀ, (C)
};

// The model as the forward pass reads it (see the layout note above).
template <osprey::Tensor H>
struct ForwardWeights {
  Config config;
  Buf<H> wte;                   // (V, C): the embedding, and the lm head's (OC, IC) matrix
  Buf<H> wpe;                   // (maxT, C)
  std::vector<BlockForwardWeights<H>> blocks;  // L blocks
  Buf<H> lnfWeight, lnfBias;    // (C), (C)
};

// ForwardWeights from the checkpoint layout. Consumes `w` (each original matrix is released as
// soon as its transpose exists, so the peak is one extra matrix, not a second model).
template <osprey::Tensor H>
osprey::Result<ForwardWeights<H>> prepareForward(H& h, Weights<Buf<H>>&& w) {
  const Config c = w.config;
  const osprey::Index C = c.C;
  if (static_cast<osprey::Index>(w.tensors.size()) != parameterTensorCount(c))
    return osprey::Error{fmt::format("gpt2: {} weight tensors, expected {}", w.tensors.size(),
                                     parameterTensorCount(c))};
  auto take = [&](osprey::Index i) -> Buf<H> {
    return std::exchange(w.tensors[static_cast<std::size_t>(i)], Buf<H>{});
  };
  ForwardWeights<H> f{c, take(kWteIndex), take(kWpeIndex), {}, take(lnfWeightIndex(c)),
                      take(lnfBiasIndex(c))};
  f.blocks.reserve(static_cast<std::size_t>(c.L));
  for (osprey::Index l = 0; l < c.L; ++l) {
    auto at = [&](BlockSlot slot) { return take(blockTensorIndex(l, slot)); };
    BlockForwardWeights<H> b;
    b.ln1Weight = at(BlockSlot::Ln1Weight);
    b.ln1Bias = at(BlockSlot::Ln1Bias);
    b.attnT = OSPREY_TRY(transpose(h, at(BlockSlot::AttnWeight), C, 3 * C));
    b.attnBias = at(BlockSlot::AttnBias);
    b.attnProjT = OSPREY_TRY(transpose(h, at(BlockSlot::AttnProjWeight), C, C));
    b.attnProjBias = at(BlockSlot::AttnProjBias);
    b.ln2Weight = at(BlockSlot::Ln2Weight);
    b.ln2Bias = at(BlockSlot::Ln2Bias);
    b.fcT = OSPREY_TRY(transpose(h, at(BlockSlot::FcWeight), C, 4 * C));
    b.fcBias = at(BlockSlot::FcBias);
    b.fcProjT = OSPREY_TRY(transpose(h, at(BlockSlot::FcProjWeight), 4 * C, C));
    b.fcProjBias = at(BlockSlot::FcProjBias);
    f.blocks.push_back(std::move(b));
  }
  return f;
}

// One block's keys and values for the positions seen so far.
template <osprey::Tensor H>
struct LayerCache {
  Buf<H> keys;    // (Tc, C)
  Buf<H> values;  // (Tc, C)
};

// The key/value cache of one sequence: a LayerCache per block, all of `length` positions.
template <osprey::Tensor H>
struct KvCache {
  std::vector<LayerCache<H>> layers;  // L entries
  osprey::Index length = 0;           // Tc
};

// The last position's logits, and the cache that continues the sequence.
template <osprey::Tensor H>
struct StepOut {
  Buf<H> logits;  // (V)
  KvCache<H> cache;
};

// The last position's hidden state after ln_f, which the lm head reads, and the grown cache.
template <osprey::Tensor H>
struct HiddenStepOut {
  Buf<H> hidden;  // (C)
  KvCache<H> cache;
};

// logits (N, V) of x (N, C) before ln_f: the final LayerNorm, then the lm head. A derived
// operation: the fast handler normalises one row inside the lm head's kernel while decoding.
template <osprey::Tensor H>
osprey::Result<Buf<H>> normLogits(H& h, const Buf<H>& x, const Buf<H>& lnWeight, const Buf<H>& lnBias,
                                  const Buf<H>& wte, osprey::Index N, osprey::Index C, osprey::Index V) {
  OSPREY_GPT2_DERIVED(normLogits, x, lnWeight, lnBias, wte, N, C, V)
  auto ln = OSPREY_TRY(layernormForward(h, x, lnWeight, lnBias, N, C));                // (N, C)
  return lmHeadOf(h, ln.out, wte, N, C, V);
}

// The three stages after attention, as both inference passes take them: on the transposed
// weights, over N rows, each a derived operation of the linear family (layers/linear.hpp) that a
// handler may answer whole (the fast handler's one-row decoding does), keeping nothing; and ln_f,
// with which the passes that stop before the lm head finish.
template <osprey::Tensor H>
struct InferenceStages {
  const ForwardWeights<H>& w;
  osprey::Index N;

  const BlockForwardWeights<H>& block(osprey::Index l) const { return w.blocks[static_cast<std::size_t>(l)]; }
  // ln_f over the N rows: the hidden states (N, C) the lm head reads.
  osprey::Result<Buf<H>> finalNorm(H& h, const Buf<H>& x) const {
    auto lnf = OSPREY_TRY(layernormForward(h, x, w.lnfWeight, w.lnfBias, N, w.config.C));  // (N, C)
    return std::move(lnf.out);
  }
  osprey::Result<Buf<H>> attentionResidual(H& h, osprey::Index l, const Buf<H>& x, const Buf<H>& y) const {
    const BlockForwardWeights<H>& b = block(l);
    return linearResidual(h, x, y, b.attnProjT, b.attnProjBias, N, w.config.C, w.config.C);  // (N, C)
  }
  osprey::Result<Buf<H>> mlp(H& h, osprey::Index l, const Buf<H>& r) const {
    const BlockForwardWeights<H>& b = block(l);
    const osprey::Index C = w.config.C;
    return normLinearGelu(h, r, b.ln2Weight, b.ln2Bias, b.fcT, b.fcBias, N, C, 4 * C);  // (N, 4C)
  }
  osprey::Result<Buf<H>> mlpResidual(H& h, osprey::Index l, const Buf<H>& r, const Buf<H>& g) const {
    const BlockForwardWeights<H>& b = block(l);
    const osprey::Index C = w.config.C;
    return linearResidual(h, r, g, b.fcProjT, b.fcProjBias, N, 4 * C, C);               // (N, C)
  }
};

// The full pass's walk over B sequences of T tokens (N = B·T rows): ln_1 goes with c_attn
// (normLinear), attention over all T positions; when `cache` is given (B = 1) it receives each
// block's keys and values, columns [C, 2C) and [2C, 3C) of qkv. Finishes with ln_f: the hidden
// states (N, C), which the callers take to the lm head (all rows, or the last).
template <osprey::Tensor H>
struct FullPass : InferenceStages<H> {
  using InferenceStages<H>::w, InferenceStages<H>::N, InferenceStages<H>::block;
  const Buf<H>& tokens;  // (N) ids as doubles
  osprey::Index B, T;
  KvCache<H>* cache;

  osprey::Result<Buf<H>> embed(H& h) const { return encoderForward(h, tokens, w.wte, w.wpe, N, T, w.config.C, 0); }
  osprey::Result<Buf<H>> attention(H& h, osprey::Index l, const Buf<H>& x) const {
    const BlockForwardWeights<H>& b = block(l);
    const osprey::Index C = w.config.C;
    auto qkv = OSPREY_TRY(normLinear(h, x, b.ln1Weight, b.ln1Bias, b.attnT, b.attnBias, N, C, 3 * C));  // (N, 3C)
    auto att = OSPREY_TRY(attentionForward(h, qkv, B, T, C, w.config.NH));            // (N, C)
    if (cache) {
      auto keys = OSPREY_TRY(sliceColumns(h, qkv, N, 3 * C, C, C));                    // (T, C)
      auto values = OSPREY_TRY(sliceColumns(h, qkv, N, 3 * C, 2 * C, C));              // (T, C)
      cache->layers.push_back(LayerCache<H>{std::move(keys), std::move(values)});
    }
    return std::move(att.out);  // the attention table (B, NH, T, T), which only a backward reads, goes
  }
  osprey::Result<Buf<H>> finish(H& h, const Buf<H>& x) const { return this->finalNorm(h, x); }
};

// The cached step's walk over one new position (N = 1) at position cache.length: its query
// attends to the cached positions and itself (attendAppending), and `next` receives the cache
// grown by its key and value. Finishes with ln_f and the lm head as one derived operation
// (normLogits): the position's logits (V).
template <osprey::Tensor H>
struct DecodePass : InferenceStages<H> {
  using InferenceStages<H>::w, InferenceStages<H>::block;
  const KvCache<H>& cache;
  const Buf<H>& token;  // (1) its id as a double
  KvCache<H>& next;

  osprey::Result<Buf<H>> embed(H& h) const {
    return encoderForward(h, token, w.wte, w.wpe, 1, 1, w.config.C, cache.length);    // (1, C)
  }
  osprey::Result<Buf<H>> attention(H& h, osprey::Index l, const Buf<H>& x) const {
    const BlockForwardWeights<H>& b = block(l);
    const LayerCache<H>& held = cache.layers[static_cast<std::size_t>(l)];
    const osprey::Index C = w.config.C;
    auto qkv = OSPREY_TRY(normLinear(h, x, b.ln1Weight, b.ln1Bias, b.attnT, b.attnBias, 1, C, 3 * C));  // (3C)
    // The cache grows by this position's key and value, columns [C, 2C) and [2C, 3C) of qkv.
    auto att = OSPREY_TRY(attendAppending(h, qkv, held.keys, held.values, cache.length, C, w.config.NH));  // (C), 2 x (Tc+1, C)
    next.layers.push_back(LayerCache<H>{std::move(att.keys), std::move(att.values)});
    return std::move(att.out);
  }
  osprey::Result<Buf<H>> finish(H& h, const Buf<H>& x) const {
    return normLogits(h, x, w.lnfWeight, w.lnfBias, w.wte, 1, w.config.C, w.config.V);  // (V)
  }
};

// The full pass over B sequences of T tokens each. tokens (B·T) hold ids as doubles. Returns the
// final hidden states after ln_f (B·T, C); when `cache` is given (B must be 1), it receives each
// block's keys and values for the T positions.
template <osprey::Tensor H>
osprey::Result<Buf<H>> forwardHidden(H& h, const ForwardWeights<H>& w, const Buf<H>& tokens,
                                     osprey::Index B, osprey::Index T, KvCache<H>* cache) {
  const Config& c = w.config;
  const osprey::Index N = OSPREY_TRY(checkedProduct("gpt2 forward", {B, T}));
  if (T < 1 || T > c.maxT)
    return osprey::Error{fmt::format("gpt2 forward: {} positions do not fit the context of {}", T, c.maxT)};
  if (cache && B != 1) return osprey::Error{"gpt2 forward: a key/value cache holds one sequence"};
  if (cache) *cache = KvCache<H>{{}, T};
  FullPass<H> pass{{w, N}, tokens, B, T, cache};
  return forwardWalk(h, pass, static_cast<osprey::Index>(w.blocks.size()));
}

template <osprey::Tensor H>
osprey::Result<Buf<H>> lmHead(H& h, const ForwardWeights<H>& w, const Buf<H>& hidden, osprey::Index N) {
  return lmHeadOf(h, hidden, w.wte, N, w.config.C, w.config.V);
}

// logits (B·T, V) of every position: the full pass (checks, full recomputation).
template <osprey::Tensor H>
osprey::Result<Buf<H>> forwardLogits(H& h, const ForwardWeights<H>& w, const Buf<H>& tokens,
                                     osprey::Index B, osprey::Index T) {
  auto hidden = OSPREY_TRY(forwardHidden(h, w, tokens, B, T, static_cast<KvCache<H>*>(nullptr)));
  return lmHead(h, w, hidden, B * T);
}

// The prompt's pass: tokens (T) of one sequence -> the last position's logits (V) and the cache.
template <osprey::Tensor H>
osprey::Result<StepOut<H>> prefill(H& h, const ForwardWeights<H>& w, const Buf<H>& tokens,
                                   osprey::Index T) {
  KvCache<H> cache;
  auto hidden = OSPREY_TRY(forwardHidden(h, w, tokens, 1, T, &cache));                 // (T, C)
  auto last = OSPREY_TRY(takeRow(h, hidden, T, w.config.C, T - 1));                    // (C)
  auto logits = OSPREY_TRY(lmHead(h, w, last, 1));                                     // (V)
  return StepOut<H>{std::move(logits), std::move(cache)};
}

// The cached step's walk without the lm head: finishes with ln_f alone, the new position's hidden
// state (C) that the lm head reads.
template <osprey::Tensor H>
struct DecodeHiddenPass : DecodePass<H> {
  osprey::Result<Buf<H>> finish(H& h, const Buf<H>& x) const { return this->finalNorm(h, x); }  // (C)
};

// A cached step's walk `Pass` (DecodePass or DecodeHiddenPass) over token (1) [its id as a double]
// at position cache.length: Out (StepOut or HiddenStepOut) of what it finishes with and the cache
// grown by one position.
template <template <class> class Pass, template <class> class Out, osprey::Tensor H>
osprey::Result<Out<H>> walkDecodeStep(H& h, const ForwardWeights<H>& w, const KvCache<H>& cache, const Buf<H>& token) {
  const Config& c = w.config;
  const osprey::Index Tc = cache.length;
  if (Tc < 1 || Tc >= c.maxT)
    return osprey::Error{fmt::format("gpt2 decode: position {} is outside the context of {}", Tc, c.maxT)};
  if (cache.layers.size() != w.blocks.size())
    return osprey::Error{fmt::format("gpt2 decode: the cache has {} blocks, the model {}",
                                     cache.layers.size(), w.blocks.size())};
  KvCache<H> next{{}, Tc + 1};
  next.layers.reserve(cache.layers.size());
  Pass<H> pass{DecodePass<H>{{w, 1}, cache, token, next}};
  auto out = OSPREY_TRY(forwardWalk(h, pass, static_cast<osprey::Index>(w.blocks.size())));
  return Out<H>{std::move(out), std::move(next)};
}

// One new position: token (1) [its id as a double] at position cache.length, attending to the
// cached positions and itself. Returns its logits (V) and the cache grown by one position.
template <osprey::Tensor H>
osprey::Result<StepOut<H>> decodeStep(H& h, const ForwardWeights<H>& w, const KvCache<H>& cache,
                                      const Buf<H>& token) {
  return walkDecodeStep<DecodePass, StepOut>(h, w, cache, token);
}

// decodeStep up to ln_f: the new position's hidden state (C) in place of its logits (the lm head
// reads it: lmHead), and the grown cache. A recorded exact decoding step makes the lm head's
// products only where they can decide the greedy choice (gpt2/cuda/bounded_choice.hpp).
template <osprey::Tensor H>
osprey::Result<HiddenStepOut<H>> decodeHiddenStep(H& h, const ForwardWeights<H>& w, const KvCache<H>& cache,
                                                  const Buf<H>& token) {
  return walkDecodeStep<DecodeHiddenPass, HiddenStepOut>(h, w, cache, token);
}

}  // namespace gpt2
