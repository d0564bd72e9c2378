// Outputs whose floats are made when something first reads them. With bf16 products, a training
// step's LayerNorm and GELU outputs and GELU's and attention's input gradients are read only as
// their bf16 twins; their floats are then a buffer made later (osprey::GpuBuffer::later), in half
// the memory until then, written by the same kernel on the same inputs as the twin, so the same
// floats (FastHandler::twinOnly). On by default; off, the floats are written at once. nvcc units
// only.
#pragma once

#include <cstdio>
#include <memory>

#include "osprey/gpu/cuda/fast.hpp"

namespace gpt2::fast_parts {

class DeferredFloats {
 public:
  using Buffer = osprey::Fast::Buffer;

  void set(bool on) { m_on = on; }
  bool on() const { return m_on; }
  // How many deferred outputs have had their floats made since the handler was made (a training
  // step on bf16 products writes one: the final LayerNorm's output, whose floats the padded lm
  // head backward's one-hot share gathers).
  osprey::Index written() const { return *m_written; }

  // A buffer of n floats made later: when first read, its block is allocated and fill(stream,
  // block) writes it (counted in written).
  template <class Fill>
  Buffer later(const std::shared_ptr<osprey::CudaDevice>& owner, osprey::Index n, Fill fill) const {
    return Buffer::later(owner, n, [fill, n, device = owner, written = m_written]() mutable -> float* {
      auto block = device->allocate<float>(n);
      if (!block.ok()) {
        std::fprintf(stderr, "osprey fast: no device memory for the %lld floats of an output stored as bf16: %s\n",
                     static_cast<long long>(n), block.error().message.c_str());
        return nullptr;
      }
      ++*written;
      fill(device->stream(), *block);
      return *block;
    });
  }

 private:
  bool m_on = true;
  std::shared_ptr<osprey::Index> m_written = std::make_shared<osprey::Index>(0);
};

}  // namespace gpt2::fast_parts
