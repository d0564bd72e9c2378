// The training step's forward: the model's one forward walk (model/walk.hpp) on the checkpoint's
// weights, keeping every activation the backward (step.hpp) reads, then the lm head and the
// cross-entropy loss.
//
// Dimension legend: config.hpp (maxT, V, L, NH, C) and layers/common.hpp (B, T, N = B·T).
//
// The walk's layers, in its order, paired into the derived operations the training path's fused
// handler answers (inference pairs them its own way, model.hpp):
//
//   x0     = wte[tokens] + wpe[t]                                          (N, C)
//   block l:  a = ln_1(x);  qkv = a·c_attn + b;  y = attention(qkv)        (N, C), (N, 3C), (N, C)
//             (the last two as one derived pair, layers/projected.hpp)
//             r = x + (y·c_proj + b);  f = ln_2(r)·c_fc + b;  g = gelu(f)  (N, C), (N, 4C), (N, 4C)
//             (f and g as one derived pair too)
//             x' = r + (g·c_proj + b)                                      (N, C)
//   z      = ln_f(x_L);  logits = z·wteᵀ;  losses = cross-entropy          (N, C), (N, V), (N)
//            (the last two as one derived pair, layers/head_loss.hpp)
//
// On the exact handlers, whose derived pairs are their two layers in turn, the logits and the
// loss are therefore those of the inference path bit for bit.
//
// No line here names a handler or a device (DESIGN.md §3).
#pragma once

#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpt2/layers/layers.hpp"
#include "gpt2/model/walk.hpp"
#include "gpt2/model/weights.hpp"
#include "gpt2/train/clock.hpp"
#include "gpt2/train/data_batches.hpp"

namespace gpt2::train {

using osprey::Index;
using osprey::Scalar;

// Parameters, gradients and optimiser moments share one record type: a Buffer per tensor.
template <osprey::Tensor H>
using Params = Weights<Buf<H>>;

// What one block's forward keeps for its backward.
template <osprey::Tensor H>
struct BlockActivations {
  Buf<H> input;          // (N, C)   the residual stream entering the block
  LayerNormOut<H> ln1;   // out (N, C), mean (N), rstd (N)
  Buf<H> qkv;            // (N, 3C)
  AttentionOut<H> attn;  // out (N, C) before c_proj, att (B, NH, T, T)
  Buf<H> residual;       // (N, C)   input + attention projection
  LayerNormOut<H> ln2;   // out (N, C), mean (N), rstd (N)
  Buf<H> fc;             // (N, 4C)  before GELU
  Buf<H> fcGelu;         // (N, 4C)
};

// The whole forward of one batch, with everything the backward reads.
template <osprey::Tensor H>
struct ForwardPass {
  Index B = 0, T = 0;
  Buf<H> tokens;                         // (N) ids as doubles
  Buf<H> targets;                        // (N) ids as doubles
  std::vector<BlockActivations<H>> blocks;  // L entries
  Buf<H> output;                         // (N, C) the residual stream after the last block
  LayerNormOut<H> lnf;                   // out (N, C), mean (N), rstd (N)
  CrossEntropyOut<H> ce;                 // losses (N), probs (N, V)
};

// ids (N) as a buffer of doubles (exact for every GPT-2 id).
template <osprey::Tensor H>
osprey::Result<Buf<H>> idBuffer(H& h, std::span<const data::TokenId> ids) {
  std::vector<Scalar> values(ids.begin(), ids.end());
  return h.fromList(std::span<const Scalar>(values));
}

// The batch's shape against the model: T within the context, ids within the vocabulary
// (checked on the host, so a bad id is a clear error before any kernel runs).
inline osprey::Result<void> checkBatch(const Config& c, const data::Batch& batch) {
  if (batch.B < 1 || batch.T < 1)
    return osprey::Error{fmt::format("a batch needs at least one row and one position (got {} x {})",
                                     batch.B, batch.T)};
  if (batch.T > c.maxT)
    return osprey::Error{fmt::format("--seq {} exceeds the model's context of {} positions", batch.T, c.maxT)};
  const auto n = static_cast<std::size_t>(batch.B * batch.T);
  if (batch.inputs.size() != n || batch.targets.size() != n)
    return osprey::Error{fmt::format("a {} x {} batch must hold {} inputs and targets (has {} and {})",
                                     batch.B, batch.T, n, batch.inputs.size(), batch.targets.size())};
  for (std::size_t i = 0; i < n; ++i)
    for (data::TokenId id : {batch.inputs[i], batch.targets[i]})
      if (id < 0 || id >= c.V)
        return osprey::Error{fmt::format("token id {} is outside the model's vocabulary of {}", id, c.V)};
  return {};
}

// The training walk's pass: each stage on the checkpoint's (IC, OC) weights, its results recorded
// in `f` (block l's in f.blocks[l], begun by its attention stage), each layer timed on the clock.
// finish hands the record over, so a pass walks once.
template <osprey::Tensor H>
struct TrainingPass {
  const Params<H>& w;
  const Laps& lap;
  ForwardPass<H> f;  // tokens and targets given; the walk fills the rest

  Index N() const { return f.B * f.T; }
  const Buf<H>& at(Index l, BlockSlot slot) const { return w.block(l, slot); }
  BlockActivations<H>& kept(Index l) { return f.blocks[static_cast<std::size_t>(l)]; }

  osprey::Result<Buf<H>> embed(H& h) {
    auto x = OSPREY_TRY(encoderForward(h, f.tokens, w.wte(), w.wpe(), N(), f.T, w.config.C, 0));  // (N, C)
    lap("forward encoder");
    return x;
  }
  osprey::Result<Buf<H>> attention(H& h, Index l, const Buf<H>& x) {
    const Index C = w.config.C;
    BlockActivations<H>& a = f.blocks.emplace_back();
    a.input = x;                                                                      // (N, C)
    a.ln1 = OSPREY_TRY(layernormForward(h, x, at(l, BlockSlot::Ln1Weight), at(l, BlockSlot::Ln1Bias), N(), C));
    lap("forward layernorm");
    auto projected = OSPREY_TRY(matmulAttentionForward(h, a.ln1.out, at(l, BlockSlot::AttnWeight),
                                                       at(l, BlockSlot::AttnBias), f.B, f.T, C, w.config.NH));
    a.qkv = std::move(projected.qkv);                                                 // (N, 3C)
    a.attn = std::move(projected.attn);                                               // (N, C)
    lap("forward matmul qkv + attention");
    return a.attn.out;
  }
  osprey::Result<Buf<H>> attentionResidual(H& h, Index l, const Buf<H>& x, const Buf<H>& y) {
    const Index C = w.config.C;
    auto r = OSPREY_TRY(residualMatmulForward(h, x, y, at(l, BlockSlot::AttnProjWeight),
                                              at(l, BlockSlot::AttnProjBias), N(), C, C));  // (N, C)
    lap("forward matmul attn proj + residual");
    BlockActivations<H>& a = kept(l);
    a.residual = std::move(r);
    return a.residual;
  }
  osprey::Result<Buf<H>> mlp(H& h, Index l, const Buf<H>& r) {
    const Index C = w.config.C;
    BlockActivations<H>& a = kept(l);
    a.ln2 = OSPREY_TRY(layernormForward(h, r, at(l, BlockSlot::Ln2Weight), at(l, BlockSlot::Ln2Bias), N(), C));
    lap("forward layernorm");
    auto projected = OSPREY_TRY(matmulGeluForward(h, a.ln2.out, at(l, BlockSlot::FcWeight),
                                                  at(l, BlockSlot::FcBias), N(), C, 4 * C));
    a.fc = std::move(projected.fc);                                                   // (N, 4C)
    a.fcGelu = std::move(projected.gelu);                                             // (N, 4C)
    lap("forward matmul fc + gelu");
    return a.fcGelu;
  }
  osprey::Result<Buf<H>> mlpResidual(H& h, Index l, const Buf<H>& r, const Buf<H>& g) {
    const Index C = w.config.C;
    auto x = OSPREY_TRY(residualMatmulForward(h, r, g, at(l, BlockSlot::FcProjWeight),
                                              at(l, BlockSlot::FcProjBias), N(), 4 * C, C));  // (N, C)
    lap("forward matmul fc proj + residual");
    return x;
  }
  osprey::Result<ForwardPass<H>> finish(H& h, const Buf<H>& x) {
    f.output = x;                                                                     // (N, C)
    f.lnf = OSPREY_TRY(layernormForward(h, x, w.lnfWeight(), w.lnfBias(), N(), w.config.C));  // (N, C)
    lap("forward layernorm");
    // logits = z·wteᵀ (N, V), then the cross-entropy: losses (N), probs (N, V)
    f.ce = OSPREY_TRY(headLoss(h, f.lnf.out, w.wte(), f.targets, N(), w.config.C, w.config.V));
    lap("forward lm head and cross-entropy");
    return std::move(f);
  }
};

// The forward of batch through weights w, keeping the activations.
template <osprey::Tensor H>
osprey::Result<ForwardPass<H>> forwardForTraining(H& h, const Params<H>& w, const data::Batch& batch,
                                                  LayerClock* clock = nullptr) {
  const Laps lap(clock);
  const Config& c = w.config;
  OSPREY_CHECK(checkBatch(c, batch));
  ForwardPass<H> f;
  f.B = batch.B;
  f.T = batch.T;
  f.tokens = OSPREY_TRY(idBuffer(h, std::span<const data::TokenId>(batch.inputs)));   // (N)
  f.targets = OSPREY_TRY(idBuffer(h, std::span<const data::TokenId>(batch.targets))); // (N)
  f.blocks.reserve(static_cast<std::size_t>(c.L));
  TrainingPass<H> pass{w, lap, std::move(f)};
  return forwardWalk(h, pass, c.L);
}

}  // namespace gpt2::train
