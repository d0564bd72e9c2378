// The fast handler's one-row decoding: linear layers with their bias and GELU or residual in one
// bandwidth kernel, attention of one query against the cache, the greedy argmax on the device
// (fast/decode_kernels.hpp).
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/decode_layers.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

inline osprey::Result<void> FastHandler::checkLinear(const Buffer& x, const Buffer& wT, const Buffer& bias,
                                                    osprey::Index N, osprey::Index IC, osprey::Index OC) {
  const char* L = "linear";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wT, OC, IC, L, "weight"));
  return fast_detail::checkShape(*this, bias, 1, OC, L, "bias");
}

inline osprey::Result<FastHandler::Buffer> FastHandler::linear(const Buffer& x, const Buffer& wT, const Buffer& bias,
                                                               osprey::Index N, osprey::Index IC, osprey::Index OC) {
  OSPREY_CHECK(checkLinear(x, wT, bias, N, IC, OC));
  if (N == 1) return oneRow(x, wT, bias.data(), IC, OC, fast_kernels::Biased{});
  return byProducts([&]<class E>(E) -> osprey::Result<Buffer> {
    const auto xs = OSPREY_TRY(operandOf<E>(x)), ws = OSPREY_TRY(operandOf<E>(wT));
    return linearProduct<E>({xs.data}, {ws.data, true}, bias, N, IC, OC);
  });
}

inline osprey::Result<FastHandler::Buffer> FastHandler::linearGelu(const Buffer& in, const Buffer& wT,
                                                                   const Buffer& bias, osprey::Index N,
                                                                   osprey::Index IC, osprey::Index OC) {
  if (N != 1) return geluForward(OSPREY_TRY(linear(in, wT, bias, N, IC, OC)));
  OSPREY_CHECK(checkLinear(in, wT, bias, N, IC, OC));
  return oneRow(in, wT, bias.data(), IC, OC, fast_kernels::GeluOf{});
}

inline osprey::Result<FastHandler::Buffer> FastHandler::linearResidual(const Buffer& x, const Buffer& in,
                                                                       const Buffer& wT, const Buffer& bias,
                                                                       osprey::Index N, osprey::Index IC,
                                                                       osprey::Index OC) {
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, OC, "residual", "a"));
  if (N != 1) return zipWith(x, OSPREY_TRY(linear(in, wT, bias, N, IC, OC)), Plus{});  // fold_rows.hpp's sum
  OSPREY_CHECK(checkLinear(in, wT, bias, N, IC, OC));
  return oneRow(in, wT, bias.data(), IC, OC, fast_kernels::PlusResidual{x.data()});
}

inline osprey::Result<FastHandler::Buffer> FastHandler::normLinear(const Buffer& x, const Buffer& lnWeight,
                                                                   const Buffer& lnBias, const Buffer& wT,
                                                                   const Buffer& bias, osprey::Index N,
                                                                   osprey::Index IC, osprey::Index OC) {
  return normalisedRow(x, lnWeight, lnBias, wT, bias, N, IC, OC, fast_kernels::Biased{},
                       [&](const Buffer& ln) { return linear(ln, wT, bias, N, IC, OC); });
}

inline osprey::Result<FastHandler::Buffer> FastHandler::normLinearGelu(const Buffer& x, const Buffer& lnWeight,
                                                                       const Buffer& lnBias, const Buffer& wT,
                                                                       const Buffer& bias, osprey::Index N,
                                                                       osprey::Index IC, osprey::Index OC) {
  return normalisedRow(x, lnWeight, lnBias, wT, bias, N, IC, OC, fast_kernels::GeluOf{},
                       [&](const Buffer& ln) { return linearGelu(ln, wT, bias, N, IC, OC); });
}

template <class Then, class Layer>
osprey::Result<FastHandler::Buffer> FastHandler::normalisedRow(const Buffer& x, const Buffer& lnWeight,
                                                               const Buffer& lnBias, const Buffer& wT,
                                                               const Buffer& bias, osprey::Index N, osprey::Index IC,
                                                               osprey::Index OC, Then then, Layer layer) {
  if (N != 1) return layer(OSPREY_TRY(layernormForward(x, lnWeight, lnBias, N, IC)).out);
  OSPREY_CHECK(fast_detail::checkShape(*this, lnWeight, 1, IC, "layernorm", "weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, lnBias, 1, IC, "layernorm", "bias"));
  OSPREY_CHECK(checkLinear(x, wT, bias, 1, IC, OC));
  return oneRow(x, wT, bias.data(), IC, OC, then, normalised(lnWeight, lnBias));
}

inline osprey::Result<FastHandler::Buffer> FastHandler::normLogits(const Buffer& x, const Buffer& lnWeight,
                                                                   const Buffer& lnBias, const Buffer& wte,
                                                                   osprey::Index N, osprey::Index C, osprey::Index V) {
  if (N != 1) return matmulForwardTransposed(OSPREY_TRY(layernormForward(x, lnWeight, lnBias, N, C)).out, wte, N, C, V);
  const char* L = "lm head";
  OSPREY_CHECK(fast_detail::checkShape(*this, lnWeight, 1, C, L, "layernorm weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, lnBias, 1, C, L, "layernorm bias"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, 1, C, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wte, V, C, L, "weight"));
  if (m_recording && m_recording->next.wte == wte.data() && m_recording->next.V == V && m_recording->next.C == C &&
      !m_recording->chose) {  // the recorded step's lm head also chooses its token
    m_recording->chose = true;
    return oneRow(x, wte, nullptr, C, V, fast_kernels::ArgmaxThen{m_recording->next}, normalised(lnWeight, lnBias));
  }
  return oneRow(x, wte, nullptr, C, V, fast_kernels::Biased{}, normalised(lnWeight, lnBias));
}

inline fast_kernels::RowNormalised FastHandler::normalised(const Buffer& lnWeight, const Buffer& lnBias) {
  return {lnWeight.data(), lnBias.data(), static_cast<float>(kLayerNormEps)};
}

inline osprey::Result<FastHandler::Buffer> FastHandler::attentionDecode(const Buffer& qkvRow, const Buffer& kCache,
                                                                        const Buffer& vCache, osprey::Index Tc,
                                                                        osprey::Index C, osprey::Index NH) {
  if (Tc <= 0) return osprey::Error{"attention decode: the cache must hold the new position"};
  return attendRow("attention decode", qkvRow, kCache, vCache, Tc, C, NH);
}

inline osprey::Result<FastHandler::Buffer> FastHandler::attendRow(const char* L, const Buffer& qkvRow,
                                                                  const Buffer& keys, const Buffer& values,
                                                                  osprey::Index held, osprey::Index C,
                                                                  osprey::Index NH, const int* position) {
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  const osprey::Index positions = position ? held + 1 : held;
  static_assert(32 * fast_kernels::kDecodeMaxPerLane == fast_shapes::kDecodeMaxHead, "shape_support.hpp's heads");
  if (auto problem = fast_shapes::decodeAttentionProblem(C, NH)) return osprey::Error{*problem};
  OSPREY_CHECK(fast_detail::checkShape(*this, qkvRow, 3, C, L, "qkv row"));
  OSPREY_CHECK(fast_detail::checkShape(*this, keys, held, C, L, "key cache"));
  OSPREY_CHECK(fast_detail::checkShape(*this, values, held, C, L, "value cache"));
  auto out = OSPREY_TRY(allocate(C));
  const auto launch = [&](auto kernel) {
    return fast_kernels::launchOverlapped(static_cast<unsigned>(NH), fast_kernels::kDecodeWarps * 32, 0, stream(),
                                          kernel, out.data(), qkvRow.data(), keys.data(), values.data(),
                                          static_cast<int>(positions), static_cast<int>(C), static_cast<int>(hs),
                                          static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))), position,
                                          position != nullptr);
  };
  OSPREY_CUDA_CHECK(hs == 64 ? launch(fast_kernels::attendOneRow<8, 8>)
                             : launch(fast_kernels::attendOneRow<32, fast_kernels::kDecodeMaxPerLane>),
                    "fast attention decode launch");
  return out;
}

inline osprey::Result<FastHandler::CandidateRoom> FastHandler::candidateRoom(int slots) {
  const osprey::Index ints = 2 * osprey::Index{slots} + 1;
  CandidateRoom room(m_device, OSPREY_TRY(m_device->allocate<int>(ints)), ints);
  OSPREY_CUDA_CHECK(cudaMemsetAsync(room.data(), 0, static_cast<std::size_t>(ints) * sizeof(int), stream()),
                    "zeroing the argmax's ticket");
  return room;
}

inline osprey::Result<void> FastHandler::launchArgmax(float* result, const Buffer& logits, const CandidateRoom& room,
                                                      int* position, int* byPosition) {
  const int n = OSPREY_TRY(fast_detail::intWidth("generate", logits.size()));
  if (n >= (1 << 24)) return osprey::Error{"generate: more than 2^24 logits"};
  OSPREY_CUDA_CHECK(fast_kernels::launchOverlapped(fast_kernels::kArgmaxBlocks, fast_kernels::kArgmaxThreads, 0, stream(),
                                                   fast_kernels::argmaxKernel, result, logits.data(), n,
                                                   fast_kernels::candidatesIn(room.data(), fast_kernels::kArgmaxBlocks),
                                                   position, byPosition),
                    "fast argmax launch");
  return {};
}

inline osprey::Result<osprey::Index> FastHandler::greedyToken(const Buffer& logits) {
  auto best = OSPREY_TRY(allocate(1));
  const auto room = OSPREY_TRY(candidateRoom(fast_kernels::kArgmaxBlocks));
  OSPREY_CHECK(launchArgmax(best.data(), logits, room, nullptr, nullptr));
  const osprey::Scalar at = get(best, 0);
  if (at < 0)
    return osprey::Error{"generate: the logits have no maximum (all NaN): the model's activations are not finite"};
  // As generate.hpp's greedyToken: a largest logit that is not finite picks no token.
  const osprey::Scalar largest = get(logits, static_cast<osprey::Index>(at));
  if (!std::isfinite(largest))
    return osprey::Error{fmt::format("generate: the largest logit is {}: the model's activations are not finite (the "
                                     "weights are broken or too large)",
                                     largest)};
  return static_cast<osprey::Index>(at);
}

}  // namespace gpt2
