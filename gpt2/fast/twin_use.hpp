// How the fast handler's layers use the bf16 twin cache (fast/bf16_twins.hpp): a product's
// operand read as the twin or the floats (fast/product_choice.hpp), an output written with its
// twin beside it, or as its twin alone with the floats made later (fast/deferred_floats.hpp).
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/twin_use.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

template <class E>
osprey::Result<FastHandler::Held<E>> FastHandler::operandOf(const Buffer& b, osprey::Index length) {
  const osprey::Index n = std::max(length, b.size());
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    return Held<E>{OSPREY_TRY(m_twins.of(b, n)), Buffer{}};
  } else {
    if (n == b.size()) return Held<E>{b.data(), Buffer{}};
    auto wide = OSPREY_TRY(allocate(n));
    OSPREY_CUDA_CHECK(cudaMemcpyAsync(wide.data(), b.data(), static_cast<std::size_t>(b.size()) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream()),
                      "copying an operand to its padded length");
    OSPREY_CUDA_CHECK(cudaMemsetAsync(wide.data() + b.size(), 0, static_cast<std::size_t>(n - b.size()) * sizeof(float),
                                      stream()),
                      "zeroing an operand's padding");
    const float* data = wide.data();
    return Held<E>{data, std::move(wide)};
  }
}

template <class Write>
osprey::Result<void> FastHandler::withTwin(const Buffer& out, Write write) {
  if (!m_products.bf16()) return write(static_cast<__nv_bfloat16*>(nullptr));
  (void)OSPREY_TRY(m_twins.add(out, out.size(), write));
  return {};
}

template <class Launch>
osprey::Result<FastHandler::Buffer> FastHandler::twinOnly(osprey::Index n, Launch launch) {
  if (!storesHalves() || n == 0) {
    auto out = OSPREY_TRY(allocate(n));
    OSPREY_CHECK(withTwin(out, [&](__nv_bfloat16* twin) { return launch(stream(), out.data(), twin); }));
    return out;
  }
  // The floats' block and their launch come when something reads them: `launch` holds its
  // operands (and so the launch the same floats), and the buffer holds `launch`, the one the twin
  // is written by below (a launch may note what its first run wrote, as the LayerNorm's does).
  auto held = std::make_shared<Launch>(std::move(launch));
  auto later = m_deferredFloats.later(runtime(), n, [held](cudaStream_t stream, float* floats) {
    // The launch ran once already with this grid (for the twin), so it cannot be refused now; a
    // fault of the device stays sticky and the next checked call reports it.
    (void)(*held)(stream, floats, nullptr);
  });
  (void)OSPREY_TRY(m_twins.add(later, n, [&](__nv_bfloat16* twin) { return (*held)(stream(), nullptr, twin); }));
  return later;
}

template <class Write>
osprey::Result<std::optional<FastHandler::Buffer>> FastHandler::storedProduct(osprey::Index n, Write write) {
  // The floats, when something reads them: the twin's values, from the twin the buffer holds.
  auto source = std::make_shared<fast_parts::HalfBuffer>();
  auto out = m_deferredFloats.later(runtime(), n, [source, n](cudaStream_t stream, float* floats) {
    // a failed launch stays for the next check
    (void)fast_parts::Bf16Twins::widen(stream, floats, source->data(), n);
  });
  bool made = false;
  (void)OSPREY_TRY(m_twins.add(
      out, n,
      [&](__nv_bfloat16* twin) -> osprey::Result<void> {
        made = OSPREY_TRY(write(twin));
        return {};
      },
      true));
  if (!made) return std::optional<Buffer>{};
  *source = m_twins.kept(out);
  return std::optional<Buffer>(std::move(out));
}

}  // namespace gpt2
