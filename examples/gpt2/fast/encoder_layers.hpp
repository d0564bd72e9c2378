// The fast handler's embedding backward (fast/encoder_kernels.hpp): each token's rows found by a
// stable sort, then the reference's gathers in float.
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/encoder_layers.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

inline osprey::Result<EncoderGrads<FastHandler>> FastHandler::encoderGradients(
    const Buffer* dwteBase, const Buffer& dout, const Buffer& tokens, osprey::Index N, osprey::Index T,
    osprey::Index C, osprey::Index V, osprey::Index maxT, osprey::Index posOffset) {
  const char* L = "encoder backward";
  OSPREY_CHECK(detail::checkEncoderBackward(*this, dout, tokens, dwteBase, N, T, C, V, maxT, posOffset));
  for (osprey::Index n : {N, C, V, maxT})
    if (n > INT_MAX) return osprey::Error{fmt::format("{}: {} is more than the kernels' int indices hold", L, n)};
  // Every token an index in [0, V): a bad one is the reference's "index out of range" fault.
  auto ids = OSPREY_TRY(build(N, fast_detail::TargetIndex{tokens.view(), V}));
  auto dwte = OSPREY_TRY(allocate(V * C));
  auto dwpe = OSPREY_TRY(allocate(maxT * C));
  const int Ni = static_cast<int>(N), Vi = static_cast<int>(V);
  std::size_t scratchBytes = 0;
  OSPREY_CUDA_CHECK(fast_kernels::encoderSortBytes(scratchBytes, Ni, Vi, stream()), "encoder backward: sort size");
  auto* device = runtime().get();
  int* ints = OSPREY_TRY(device->allocate<int>(fast_kernels::encoderWorkspaceInts(N, V)));
  const std::shared_ptr<void> heldInts(ints, [device](void* p) { device->release(p); });
  auto* scratch = OSPREY_TRY(device->allocate<unsigned char>(static_cast<osprey::Index>(scratchBytes) + 1));
  const std::shared_ptr<void> heldScratch(scratch, [device](void* p) { device->release(p); });
  OSPREY_CUDA_CHECK(fast_kernels::encoderGradients(stream(), dwte.data(), dwpe.data(),
                                                   dwteBase ? dwteBase->data() : nullptr, dout.data(), ids.data(), ints,
                                                   scratch, scratchBytes, Ni, static_cast<int>(T), static_cast<int>(C),
                                                   Vi, static_cast<int>(maxT), static_cast<int>(posOffset)),
                    "encoder backward");
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
