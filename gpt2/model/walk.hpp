// GPT-2's forward walk, written once: the embedding, then every block's four stages in order,
// then what follows the last block. Inference (model.hpp: the full pass and the cached step) and
// training (train/forward.hpp) walk the model through this one function, so the layers and their
// order cannot drift apart between them.
//
//   x  = embed                                        wte[tokens] + wpe[positions]     (N, C)
//   for each block l:
//     y  = attention(l, x)                            attention(ln_1(x) · c_attn + b)  (N, C)
//     r  = attentionResidual(l, x, y)                 x + (y · c_proj + b)             (N, C)
//     g  = mlp(l, r)                                  gelu(ln_2(r) · c_fc + b)         (N, 4C)
//     x  = mlpResidual(l, r, g)                       r + (g · c_proj + b)             (N, C)
//   out = finish(x)                                   ln_f, and the head where the pass has one
//
// What a pass chooses, and the walk does not: its weights' layout (inference holds the block's
// matrices transposed, training the checkpoint's), how a stage's layers pair into the derived
// operations a handler may answer (inference's normLinear and linearResidual, training's
// matmulAttentionForward and residualMatmulForward: each path keeps the pairs its fused handler
// answers), and what it keeps. The training pass records the activations its backward reads; the
// inference passes keep nothing a stage does not return, so the walk never holds a training-only
// tensor for them (what it holds between stages is x, y, r and g, each dropped when the next
// block starts).
#pragma once

#include <concepts>
#include <utility>

#include "gpt2/layers/common.hpp"

namespace gpt2 {

// What forwardWalk asks of a pass P on handler H: the stages above, each returning its stage's
// output (or why it could not), and finish returning the walk's result.
template <class P, class H>
concept WalkPass = osprey::Tensor<H> && requires(P& p, H& h, osprey::Index l, const Buf<H>& x) {
  { p.embed(h) } -> std::same_as<osprey::Result<Buf<H>>>;
  { p.attention(h, l, x) } -> std::same_as<osprey::Result<Buf<H>>>;
  { p.attentionResidual(h, l, x, x) } -> std::same_as<osprey::Result<Buf<H>>>;
  { p.mlp(h, l, x) } -> std::same_as<osprey::Result<Buf<H>>>;
  { p.mlpResidual(h, l, x, x) } -> std::same_as<osprey::Result<Buf<H>>>;
  p.finish(h, x);
};

// The walk over `blocks` blocks; returns what the pass's finish returns (a Result).
template <osprey::Tensor H, WalkPass<H> P>
auto forwardWalk(H& h, P& pass, osprey::Index blocks) -> decltype(pass.finish(h, std::declval<const Buf<H>&>())) {
  auto x = OSPREY_TRY(pass.embed(h));                                                  // (N, C)
  for (osprey::Index l = 0; l < blocks; ++l) {
    auto y = OSPREY_TRY(pass.attention(h, l, x));                                      // (N, C)
    auto r = OSPREY_TRY(pass.attentionResidual(h, l, x, y));                           // (N, C)
    auto g = OSPREY_TRY(pass.mlp(h, l, r));                                            // (N, 4C)
    x = OSPREY_TRY(pass.mlpResidual(h, l, r, g));                                      // (N, C)
  }
  return pass.finish(h, x);
}

}  // namespace gpt2
