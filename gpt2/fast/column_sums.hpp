// Column sums kept beside the buffers they sum: a linear layer's bias gradient is the column sums
// of its dout, and the kernels that write those douts in a training step (the LayerNorm
// backwards, GELU's backward, flash attention's backward) already hold every value in their
// registers, so they sum the columns as they go (fast/kernels/) and the weight gradient's layer
// takes the sums from here instead of reading dout again (cuBLASLt's bias-gradient epilogue ran
// as a kernel of its own that read dout once more: bench/cuda/NOTES.md has its cost). Sums are
// kept, as a twin is, while the buffer's memory lives (fast/kept_beside.hpp). nvcc units only.
#pragma once

#include <utility>

#include "gpt2/fast/kept_beside.hpp"
#include "osprey/gpu/cuda/fast.hpp"

namespace gpt2::fast_parts {

class ColumnSums {
 public:
  using Buffer = osprey::Fast::Buffer;

  // Keeps `sums`, b's column sums over its rows of `width`, taken by the kernel that wrote b.
  void keep(const Buffer& b, osprey::Index width, Buffer sums) {
    m_kept.forgetDead();
    m_kept.add(b, width, std::move(sums));
  }
  // b's column sums over rows of `width` where its producer kept them (counted in taken), else
  // null.
  const Buffer* take(const Buffer& b, osprey::Index width) {
    const Buffer* sums = m_kept.find(b, width);
    if (sums) ++m_taken;
    return sums;
  }
  // How many sums have been taken since the handler was made.
  osprey::Index taken() const { return m_taken; }

 private:
  KeptBeside<Buffer> m_kept;
  osprey::Index m_taken = 0;
};

}  // namespace gpt2::fast_parts
