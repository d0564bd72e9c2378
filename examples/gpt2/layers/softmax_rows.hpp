// Row primitives shared by attention and cross-entropy: the few OSPREY_FN loops whose order fixes
// the bits of a softmax. Every caller (full attention, KV-cache decoding, cross-entropy) runs
// these same functions, so a row computed by any of them is the same doubles.
#pragma once

#include "gpt2/layers/common.hpp"
#include "gpt2/layers/ordered_sum.hpp"

namespace gpt2 {

// sum_j a[ao + j] * b[bo + j*bStride] for j in [0, count), ascending from 0.0.
OSPREY_INLINE osprey::Scalar dotStrided(osprey::View a, osprey::Int ao, osprey::View b, osprey::Int bo,
                                        osprey::Int bStride, osprey::Int count) {
  return orderedSum(count, [&](osprey::Int j) { return a[ao + j] * b[bo + j * bStride]; });
}

// sum_j a[ao + j] * b[bo + j] for j in [0, count), ascending from 0.0.
OSPREY_INLINE osprey::Scalar dot(osprey::View a, osprey::Int ao, osprey::View b, osprey::Int bo,
                                 osprey::Int count) {
  return orderedSum(count, [&](osprey::Int j) { return a[ao + j] * b[bo + j]; });
}

// max of p[off .. off+count), count >= 1, first to last (the first of equal maxima is kept).
OSPREY_INLINE osprey::Scalar rowMax(osprey::View p, osprey::Int off, osprey::Int count) {
  return orderedFold(p[off], 1, count, [&](osprey::Int j) { return p[off + j]; },
                     [](osprey::Scalar m, osprey::Scalar x) { return x > m ? x : m; });
}

// sum_j exp(p[off + j] - m) for j in [0, count), ascending from 0.0.
OSPREY_INLINE osprey::Scalar rowExpSum(osprey::View p, osprey::Int off, osprey::Int count,
                                       osprey::Scalar m) {
  return orderedSum(count, [&](osprey::Int j) { return osprey::math::exp(p[off + j] - m); });
}

}  // namespace gpt2
