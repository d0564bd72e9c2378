// The fast handler's embedding backward (fast/token_sums.hpp): each token's rows found by a stable
// sort, then summed in float in segments of rows.
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/encoder_layers.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

inline osprey::Result<FastHandler::TokenRows> FastHandler::tokenRows(const Buffer& ids, osprey::Index N,
                                                                     osprey::Index V, osprey::Index C) {
  if (N > INT_MAX || V > INT_MAX)
    return osprey::Error{fmt::format("sorting rows by token: {} rows of ids below {} are more than int indices hold",
                                     N, V)};
  const int Ni = static_cast<int>(N), Vi = static_cast<int>(V);
  std::size_t scratchBytes = 0;
  OSPREY_CUDA_CHECK(fast_kernels::tokenSortBytes(scratchBytes, Ni, Vi, stream()), "sorting rows by token: scratch size");
  TokenRows held;
  const osprey::Index ints = fast_kernels::tokenWorkspaceInts(N, V), bytes = static_cast<osprey::Index>(scratchBytes) + 1;
  held.ints = {m_device, OSPREY_TRY(m_device->allocate<int>(ints)), ints};
  held.scratch = {m_device, OSPREY_TRY(m_device->allocate<unsigned char>(bytes)), bytes};
  const osprey::Index partials = fast_kernels::tokenSumsFloats(N, C) + 1;  // (never empty)
  held.partials = {m_device, OSPREY_TRY(m_device->allocate<float>(partials)), partials};
  OSPREY_CUDA_CHECK(fast_kernels::sortTokenRows(stream(), held.runs, ids.data(), held.ints.data(), held.scratch.data(),
                                                scratchBytes, Ni, Vi),
                    "sorting rows by token");
  return held;
}

inline osprey::Result<EncoderGrads<FastHandler>> FastHandler::encoderGradients(
    const Buffer* dwteBase, const Buffer& dout, const Buffer& tokens, osprey::Index N, osprey::Index T,
    osprey::Index C, osprey::Index V, osprey::Index maxT, osprey::Index posOffset) {
  const char* L = "encoder backward";
  OSPREY_CHECK(detail::checkEncoderBackward(*this, dout, tokens, dwteBase, N, T, C, V, maxT, posOffset));
  for (osprey::Index n : {C, maxT})  // (tokenRows checks N and V)
    if (n > INT_MAX) return osprey::Error{fmt::format("{}: {} is more than the kernels' int indices hold", L, n)};
  // Every token an index in [0, V): a bad one is the reference's "index out of range" fault.
  auto ids = OSPREY_TRY(build(N, fast_detail::TargetIndex{tokens.view(), V}));
  const auto rows = OSPREY_TRY(tokenRows(ids, N, V, C));
  auto dwte = OSPREY_TRY(allocate(V * C));
  auto dwpe = OSPREY_TRY(allocate(maxT * C));
  const int Ci = static_cast<int>(C);
  OSPREY_CUDA_CHECK(fast_kernels::tokenSums(stream(), dwte.data(), dwteBase ? dwteBase->data() : nullptr, 1.0f, 1.0f,
                                            dout.data(), rows.runs, rows.partials.data(), static_cast<int>(V), Ci),
                    "encoder backward: token sums");
  OSPREY_CUDA_CHECK(fast_kernels::positionSums(stream(), dwpe.data(), dout.data(), static_cast<int>(N),
                                               static_cast<int>(T), Ci, static_cast<int>(maxT),
                                               static_cast<int>(posOffset)),
                    "encoder backward: position sums");
  return EncoderGrads<FastHandler>{std::move(dwte), std::move(dwpe)};
}

inline osprey::Result<EncoderGrads<FastHandler>> FastHandler::encoderBackward(const Buffer& dout, const Buffer& tokens,
                                                                              osprey::Index N, osprey::Index T,
                                                                              osprey::Index C, osprey::Index V,
                                                                              osprey::Index maxT,
                                                                              osprey::Index posOffset) {
  return encoderGradients(nullptr, dout, tokens, N, T, C, V, maxT, posOffset);
}

inline osprey::Result<EncoderGrads<FastHandler>> FastHandler::encoderBackwardOnto(
    const Buffer& dwteBase, const Buffer& dout, const Buffer& tokens, osprey::Index N, osprey::Index T,
    osprey::Index C, osprey::Index V, osprey::Index maxT, osprey::Index posOffset) {
  return encoderGradients(&dwteBase, dout, tokens, N, T, C, V, maxT, posOffset);
}

}  // namespace gpt2
