// Column sums kept beside the buffers they sum: a linear layer's bias gradient is the column sums
// of its dout, and the kernels that write those douts in a training step (the LayerNorm
// backwards, GELU's backward) already hold every value in their registers, so they sum the
// columns as they go (fast/row_kernels.hpp) and matmulGradients takes the sums from here instead
// of reading dout again (cuBLASLt's bias-gradient epilogue ran as a kernel of its own that read
// dout once more: bench/cuda/NOTES.md has its cost).
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/column_sums.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

inline void FastHandler::keepColumnSums(const Buffer& b, osprey::Index width, Buffer sums) {
  std::erase_if(m_columnSums, [](const ColumnSums& s) { return s.source.expired(); });
  m_columnSums.push_back(ColumnSums{b.memory(), b.address(), b.size(), width, std::move(sums)});
}

inline const FastHandler::Buffer* FastHandler::summedColumns(const Buffer& b, osprey::Index width) const {
  for (const ColumnSums& s : m_columnSums)
    if (s.width == width && fast_detail::sameBuffer(s.source, s.data, s.n, b)) return &s.sums;
  return nullptr;
}

inline osprey::Result<FastHandler::Buffer> FastHandler::geluBackwardSummed(const Buffer& dout, const Buffer& x,
                                                                          osprey::Index N, osprey::Index width) {
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, width, "gelu backward", "x"));
  OSPREY_CHECK(checkLength(*this, dout, x.size(), "gelu backward", "dout"));
  if (N == 0) return geluBackward(dout, x);
  const int widthInt = OSPREY_TRY(fast_detail::intWidth("gelu backward", width));
  // A few blocks a multiprocessor, each walking rows a grid apart: few partial sums to add. Four,
  // not five: bounded to 96 registers for five, the pipelined kernel ran no faster on the H200
  // (bench/cuda/NOTES.md), and the totals would add a quarter more partial rows, grouped
  // otherwise (other bits in the bias gradient).
  const auto blocks = static_cast<int>(std::min<osprey::Index>(N, 4 * osprey::Index{m_device->multiprocessors()}));
  const int multiprocessors = m_device->multiprocessors();
  bool fits = false;
  Buffer sums, partials;
  auto out = OSPREY_TRY(withElements(dout, [&]<class D>(Elements<D> douts) {
    return withElements(x, [&]<class X>(Elements<X> xs) -> osprey::Result<Buffer> {
      fits = fast_kernels::geluSumsFit(douts.data, xs.data, width);
      if (!fits) return geluBackward(dout, x);
      sums = OSPREY_TRY(allocate(width));
      partials = OSPREY_TRY(allocate(osprey::Index{blocks} * width));
      // The launch's first run (the twin, or the floats and the twin) sums the columns; a later
      // one (the deferred floats) writes the same values by GeluBackwardBody, without them.
      return twinOnly(x.size(), [douts, xs, N, widthInt, multiprocessors, blocks, partials = partials.data(),
                                 first = true](cudaStream_t stream, float* floats, __nv_bfloat16* twin) mutable {
        if (!std::exchange(first, false))
          return byFours(stream, multiprocessors, "fast gelu backward launch",
                         fast_kernels::GeluBackwardBody<X, D>{floats, douts.data, xs.data, twin}, N * widthInt);
        // Registers for the groups a thread takes (1 .. kSumGroups, geluSumsFit), no more.
        const auto summed = [&](auto groups) {
          fast_kernels::geluBackwardSummed<X, D, decltype(groups)::value>
              <<<blocks, fast_kernels::kSumThreads, 0, stream>>>(floats, twin, partials, douts.data, xs.data, N,
                                                                 widthInt);
        };
        static_assert(fast_kernels::kSumGroups == 4, "a case for each count of groups");
        switch ((widthInt / 8 + fast_kernels::kSumThreads - 1) / fast_kernels::kSumThreads) {
          case 0:  // no columns: nothing to write
          case 1: summed(std::integral_constant<int, 1>{}); break;
          case 2: summed(std::integral_constant<int, 2>{}); break;
          case 3: summed(std::integral_constant<int, 3>{}); break;
          default: summed(std::integral_constant<int, 4>{}); break;
        }
        return fast_detail::launched("fast gelu backward with column sums launch");
      });
    });
  }));
  if (!fits) return out;
  OSPREY_CUDA_CHECK(fast_kernels::launchColumnTotals(stream(), fast_kernels::ColumnSets{{sums.data(), nullptr, nullptr}, widthInt},
                                                     partials.data(), blocks, 1),
                    "fast gelu backward: column totals launch");
  keepColumnSums(out, width, std::move(sums));
  return out;
}

}  // namespace gpt2
