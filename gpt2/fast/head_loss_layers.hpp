// The fast handler's lm head and loss (layers/head_loss.hpp). For the lm head's V (not a multiple
// of 4), the logits are computed into rows padded to Vp (cuBLAS's aligned kernels), the
// cross-entropy overwrites them with the probabilities in that layout, and the backward's padded
// products read the probabilities as they are, taking the targets' one-hot share off afterwards:
// the (N, V) logits are never packed and dlogits never formed. `probs` is then (N, Vp), for
// headLossBackward alone: floats with TF32 products; with bf16 products the probabilities as bf16,
// two to each float of the buffer (the backward's products read nothing else, and the float
// logits are released after the loss). Other shapes: the layers one by one.
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/head_loss_layers.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

inline osprey::Result<FastHandler::HeadLossShape> FastHandler::checkHeadLoss(const char* layer, const Buffer& z,
                                                                              const Buffer& wte, const Buffer& targets,
                                                                              osprey::Index N, osprey::Index C,
                                                                              osprey::Index V) {
  (void)OSPREY_TRY(fast_detail::intWidth(layer, C));
  OSPREY_CHECK(fast_detail::checkShape(*this, z, N, C, layer, "z"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wte, V, C, layer, "wte"));
  OSPREY_CHECK(fast_detail::checkShape(*this, targets, N, 1, layer, "targets"));
  HeadLossShape shape;
  shape.V = OSPREY_TRY(fast_detail::intWidth(layer, V));
  shape.Vp = OSPREY_TRY(fast_detail::intWidth(layer, fast_detail::paddedWidth(V)));
  // Every target an index in [0, V): a bad one is the reference's "index out of range" fault.
  shape.ids = OSPREY_TRY(build(targets.size(), fast_detail::TargetIndex{targets.view(), V}));
  return shape;
}

inline osprey::Result<CrossEntropyOut<FastHandler>> FastHandler::headLoss(const Buffer& z, const Buffer& wte,
                                                                          const Buffer& targets, osprey::Index N,
                                                                          osprey::Index C, osprey::Index V) {
  if (!fast_detail::padsRows(N, V)) return reference::headLoss(*this, z, wte, targets, N, C, V);
  const auto checked = OSPREY_TRY(checkHeadLoss("lm head and cross-entropy", z, wte, targets, N, C, V));
  auto wide = OSPREY_TRY(paddedTransposedProduct(z, wte, N, C, V));  // logits, rows Vp wide
  auto losses = OSPREY_TRY(allocate(N));
  const bool halves = m_products.bf16();
  auto probs = halves ? OSPREY_TRY(allocate(probsLength(halves, N, checked.Vp))) : wide;
  auto* halfProbs = halves ? reinterpret_cast<__nv_bfloat16*>(probs.data()) : nullptr;
  OSPREY_CHECK(crossEntropyRows(halves ? nullptr : probs.data(), losses.data(), wide.data(), targets.data(), N,
                                checked.V, checked.Vp, halfProbs));
  return CrossEntropyOut<FastHandler>{std::move(losses), std::move(probs)};
}

inline osprey::Result<MatmulTransposedGrads<FastHandler>> FastHandler::headLossBackward(
    const Buffer& probs, const Buffer& targets, const Buffer& z, const Buffer& wte, osprey::Index N, osprey::Index C,
    osprey::Index V, osprey::Scalar dloss) {
  if (!fast_detail::padsRows(N, V)) return reference::headLossBackward(*this, probs, targets, z, wte, N, C, V, dloss);
  const char* L = "lm head and cross-entropy backward";
  const auto checked = OSPREY_TRY(checkHeadLoss(L, z, wte, targets, N, C, V));
  const bool halves = m_products.bf16();
  if (probs.size() != probsLength(halves, N, checked.Vp))
    return osprey::Error{fmt::format("{}: probs holds {} values, where this handler's headLoss keeps {} ({} rows "
                                     "padded to {}{})",
                                     L, probs.size(), probsLength(halves, N, checked.Vp), N, checked.Vp,
                                     halves ? ", as bf16 pairs" : "")};
  // dlogits = (probs - onehot)·dloss, never formed: the padded products read probs as they are,
  // then the one-hot's share is taken off in float (dz: each row's target row of wte; dwte: each
  // token's rows of z, gathered in row order) and the sum scaled by dloss.
  auto g = OSPREY_TRY(paddedTransposedGrads(probs, z, wte, N, C, V,  // probs·wte, probsᵀ·z
                                            halves ? reinterpret_cast<const __nv_bfloat16*>(probs.data()) : nullptr));
  const osprey::Index NC = N * C;
  const auto blocks = static_cast<unsigned>(std::min<osprey::Index>((NC + fast_kernels::kVocabThreads - 1) /
                                                                        fast_kernels::kVocabThreads, 65535));
  fast_kernels::headTargetCorrection<<<blocks, fast_kernels::kVocabThreads, 0, stream()>>>(
      g.dx.data(), wte.data(), targets.data(), NC, static_cast<int>(C), checked.V, static_cast<float>(dloss));
  OSPREY_CHECK(fast_detail::launched("lm head backward: the targets' rows"));
  const auto rows = OSPREY_TRY(tokenRows(checked.ids, N, V, C));
  OSPREY_CUDA_CHECK(fast_kernels::tokenSums(stream(), g.dwt.data(), g.dwt.data(), static_cast<float>(dloss),
                                            static_cast<float>(-dloss), z.data(), rows.runs, rows.partials.data(),
                                            checked.V, static_cast<int>(C)),
                    "lm head backward: the targets' sums");
  return g;
}

}  // namespace gpt2
