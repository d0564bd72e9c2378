// The fast handler's one-row decoding: linear layers with their bias and GELU or residual in one
// bandwidth kernel, attention of one query against the cache, the greedy argmax on the device
// (fast/decode_kernels.hpp); the continuation, recorded as a CUDA graph by the decode recorder
// (fast/decode_graph.hpp), and the layers that answer for its recording.
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
  return m_products.by([&]<class E>(E) -> osprey::Result<Buffer> {
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
  fast_parts::DecodeRecording* r = m_recorder.recording();
  if (r && r->next.wte == wte.data() && r->next.V == V && r->next.C == C &&
      !r->chose) {  // the recorded step's lm head also chooses its token
    r->chose = true;
    return oneRow(x, wte, nullptr, C, V, fast_kernels::ArgmaxThen{r->next}, normalised(lnWeight, lnBias));
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

inline osprey::Result<osprey::Index> FastHandler::greedyToken(const Buffer& logits) {
  auto best = OSPREY_TRY(allocate(1));
  const auto room = OSPREY_TRY(fast_detail::candidateRoom(m_device, fast_kernels::kArgmaxBlocks));
  OSPREY_CHECK(fast_detail::launchArgmax(stream(), best.data(), logits, room, nullptr, nullptr));
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

// Decoding as a CUDA graph (fast/decode_graph.hpp), reading the weights' bf16 copies
// (fast/half_weights.hpp) unless told to read the floats.
template <class Weights, class Step, class OnToken>
osprey::Result<std::vector<int>> FastHandler::continueGreedy(const Weights& w, Step& step, osprey::Index count,
                                                             OnToken& onToken) {
  static_assert(std::is_same_v<Weights, ForwardWeights<FastHandler>> && std::is_same_v<Step, StepOut<FastHandler>>);
  if (count < 2) return reference::continueGreedy(*this, w, step, count, onToken);
  std::unique_ptr<HalfWeights> half;  // outlives the graph that reads it
  if (m_decodeWeights.halves()) half = OSPREY_TRY(halveWeights(w));
  if (!m_recorder.on()) return reference::continueGreedy(*this, w, step, count, onToken);
  return m_recorder.continueGreedy(*this, w, step, count, onToken);
}

inline osprey::Result<FastHandler::Buffer> FastHandler::encoderForward(const Buffer& tokens, const Buffer& wte,
                                                                       const Buffer& wpe, osprey::Index N,
                                                                       osprey::Index T, osprey::Index C,
                                                                       osprey::Index posOffset) {
  const fast_parts::DecodeRecording* r = m_recorder.recording();
  if (!r) return reference::encoderForward(*this, tokens, wte, wpe, N, T, C, posOffset);
  const char* L = "encoder (recorded decoding step)";
  if (N != 1 || T != 1 || posOffset != r->start)
    return osprey::Error{fmt::format("{}: expected one token at position {}, got {} at {}", L, r->start, N, posOffset)};
  OSPREY_CHECK(fast_detail::checkShape(*this, tokens, 1, 1, L, "tokens"));
  if (C != r->embedding.size() || wte.data() != r->next.wte || wpe.data() != r->next.wpe)
    return osprey::Error{fmt::format("{}: the embedding is not the recording's", L)};
  return r->embedding;  // written before the first replay, and by each replay's lm head for the next
}

inline osprey::Result<AttendAppendingOut<FastHandler>> FastHandler::attendAppending(const Buffer& qkvRow,
                                                                                    const Buffer& keys,
                                                                                    const Buffer& values,
                                                                                    osprey::Index Tc, osprey::Index C,
                                                                                    osprey::Index NH) {
  const fast_parts::DecodeRecording* r = m_recorder.recording();
  if (!r) return reference::attendAppending(*this, qkvRow, keys, values, Tc, C, NH);
  const char* L = "attention decode (recorded decoding step)";
  // The cache must be the recording's own, with room for the whole context.
  const Buffer* room[2] = {nullptr, nullptr};
  for (std::size_t l = 0; l < r->keys.size(); ++l)
    if (r->keys[l].data() == keys.data() && r->values[l].data() == values.data())
      room[0] = &r->keys[l], room[1] = &r->values[l];
  if (!room[0] || Tc != r->start)
    return osprey::Error{fmt::format("{}: the cache is not the recording's at position {}", L, r->start)};
  auto out = OSPREY_TRY(attendRow(L, qkvRow, keys, values, Tc, C, NH, r->position));
  return AttendAppendingOut<FastHandler>{std::move(out), room[0]->prefix((Tc + 1) * C), room[1]->prefix((Tc + 1) * C)};
}

template <class Weights>
osprey::Result<std::unique_ptr<FastHandler::HalfWeights>> FastHandler::halveWeights(const Weights& w) {
  static_assert(std::is_same_v<Weights, ForwardWeights<FastHandler>>);
  if (m_decodeWeights.inUse()) return osprey::Error{"decoding: bf16 weight copies are already in use"};
  // Each weight's twin: made now unless a product has made it, kept while the weight lives.
  for (const BlockForwardWeights<FastHandler>& b : w.blocks)
    for (const Buffer* m : {&b.attnT, &b.attnProjT, &b.fcT, &b.fcProjT}) (void)OSPREY_TRY(m_twins.of(*m, m->size()));
  (void)OSPREY_TRY(m_twins.of(w.wte, w.wte.size()));
  return m_decodeWeights.use();
}

inline const __nv_bfloat16* FastHandler::halfOf(const Buffer& w) const {
  return m_decodeWeights.inUse() ? m_twins.made(w, w.size()) : nullptr;
}

}  // namespace gpt2
