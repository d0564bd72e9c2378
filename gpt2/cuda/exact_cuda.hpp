// The exact gpu handler on the cuda device as GPT-2's commands run it: osprey::GpuCuda with the
// layers it answers in fewer launches, each with the reference's own operations in the
// reference's order (gpt2/layers/common.hpp states the rule), so every result keeps gpu/host's
// bits: LayerNorm's forward in one launch and its backward's per-row part in one
// (layernorm_rows.hpp), the attention's causal softmax with each exp computed once and its
// backward (softmax_rows.hpp). Decoding runs on RecordedCuda (recorded_cuda.hpp), which answers
// the forward the same way.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/exact_cuda.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <memory>
#include <utility>

#include "gpt2/cuda/layernorm_rows.hpp"
#include "gpt2/cuda/softmax_rows.hpp"
#include "osprey/gpu/cuda/handler.hpp"

namespace gpt2 {

class ExactCuda : public osprey::GpuCuda {
 public:
  explicit ExactCuda(std::shared_ptr<osprey::CudaDevice> device) : osprey::GpuCuda(std::move(device)) {}

  osprey::Result<LayerNormOut<ExactCuda>> layernormForward(const Buffer& x, const Buffer& w, const Buffer& b,
                                                           osprey::Index N, osprey::Index C) {
    return layernorm_rows::layernormOneLaunch(*this, x, w, b, N, C);
  }
  osprey::Result<LayerNormGrads<ExactCuda>> layernormBackward(const Buffer& dout, const Buffer& x, const Buffer& w,
                                                              const Buffer& mean, const Buffer& rstd, osprey::Index N,
                                                              osprey::Index C) {
    return layernorm_rows::layernormBackwardOneLaunch(*this, dout, x, w, mean, rstd, N, C);
  }
  osprey::Result<Buffer> causalSoftmax(const Buffer& scores, osprey::Index R, osprey::Index T,
                                       osprey::math::DivideBy scale) {
    return softmax_rows::causalSoftmaxRows(*this, scores, R, T, scale);
  }
  osprey::Result<Buffer> causalSoftmaxBackward(const Buffer& att, const Buffer& datt, osprey::Index R,
                                               osprey::Index T, osprey::math::DivideBy scale) {
    return softmax_rows::causalSoftmaxBackwardRows(*this, att, datt, R, T, scale);
  }
};

}  // namespace gpt2
