// Copying a handler's buffers back to the host, for checkpoints.
//
// The effect's only read-back is get(b, i), one element at a time: fine for host memory, far too
// slow for 124M parameters on a device. A buffer type that offers a bulk copy is used through
// it, detected by what the buffer supports (never by naming a handler): the GPU surface's
// fromGpu, or a host list's values(); anything else falls back to get.
#pragma once

#include <vector>

#include "gpt2/layers/common.hpp"
#include "gpt2/model/weights.hpp"
#include "osprey/gpu/surface.hpp"

namespace gpt2::train {

template <osprey::Tensor H>
osprey::Result<std::vector<osprey::Scalar>> hostValues(H& h, const Buf<H>& b) {
  if constexpr (requires { osprey::fromGpu(b); }) {
    return osprey::fromGpu(b);
  } else if constexpr (requires { b.values(); }) {
    return std::vector<osprey::Scalar>(b.values().begin(), b.values().end());
  } else {
    std::vector<osprey::Scalar> out(static_cast<std::size_t>(h.length(b)));
    for (osprey::Index i = 0; i < h.length(b); ++i) out[static_cast<std::size_t>(i)] = h.get(b, i);
    return out;
  }
}

// Every tensor of w on the host.
template <osprey::Tensor H>
osprey::Result<HostWeights> hostCopy(H& h, const Weights<Buf<H>>& w) {
  HostWeights out{w.config, {}};
  out.tensors.reserve(w.tensors.size());
  for (const Buf<H>& t : w.tensors) out.tensors.push_back(HostTensor{OSPREY_TRY(hostValues(h, t))});
  return out;
}

}  // namespace gpt2::train
