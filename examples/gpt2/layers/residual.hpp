// The residual connection out = a + b, and its backward: the gradient passes through unchanged
// to both inputs (dout is the gradient of a and of b; buffers are immutable, so it is shared).
#pragma once

#include "gpt2/layers/common.hpp"

namespace gpt2 {

template <class H>
struct ResidualGrads {
  Buf<H> da;  // same shape as a
  Buf<H> db;  // same shape as b
};

namespace reference {

// out = a + b, element-wise (same shape).
template <osprey::Tensor H>
osprey::Result<Buf<H>> residualForward(H& h, const Buf<H>& a, const Buf<H>& b) {
  OSPREY_CHECK(checkLength(h, b, h.length(a), "residual", "b"));
  return add(h, a, b);
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<Buf<H>> residualForward(H& h, const Buf<H>& a, const Buf<H>& b) {
  OSPREY_GPT2_DERIVED(residualForward, a, b)
  return reference::residualForward(h, a, b);
}

// da = db = dout.
template <osprey::Tensor H>
osprey::Result<ResidualGrads<H>> residualBackward(H&, const Buf<H>& dout) {
  return ResidualGrads<H>{dout, dout};
}

}  // namespace gpt2
