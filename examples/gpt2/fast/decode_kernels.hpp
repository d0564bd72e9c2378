// The fast handler's kernels for one-row work, the shape of batch-1 decoding: a linear layer on one
// row with its bias and the next layer's element-wise work in the same kernel, attention of one
// query against the key/value cache, and the greedy argmax on the device. nvcc units only.
//
// Decoding reads every weight once per token, so these are bandwidth kernels: a warp per output
// streams one weight row with 16-byte loads. The formulas are the reference's (model.hpp's
// linear, linearGelu, linearResidual; attention.hpp's attentionDecode; generate.hpp's greedyToken),
// in float.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/decode_kernels.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include "gpt2/fast/causal_softmax.hpp"  // warpSum, warpMax
#include "gpt2/fast/row_kernels.hpp"     // kGeluScaleF, kGeluCubicF
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// What a one-row linear layer writes for output o, given y = (x · W)[o] + bias[o].
struct Biased {
  __device__ float operator()(int, float y) const { return y; }
};
struct GeluOf {
  __device__ float operator()(int, float y) const {
    return (0.5f * y) * (1.0f + tanhf(kGeluScaleF * (y + kGeluCubicF * (y * y) * y)));
  }
};
struct PlusResidual {
  const float* residual;
  __device__ float operator()(int o, float y) const { return residual[o] + y; }
};

namespace {  // internal linkage (osprey/gpu/cuda.hpp says why)

constexpr int kRowWarpsPerBlock = 8;

// y[o] = then(o, Σ_k wT[o][k]·x[k] + bias[o]) for o < OC; wT (OC, IC) row-major, bias may be null.
template <class Then>
__global__ void __launch_bounds__(kRowWarpsPerBlock * 32)
    linearRow(float* y, const float* wT, const float* x, const float* bias, int IC, int OC, Then then) {
  const int o = static_cast<int>(blockIdx.x) * kRowWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  if (o >= OC) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float* w = wT + static_cast<osprey::Index>(o) * IC;
  float acc = 0.0f;
  if (IC % 4 == 0) {  // rows start on 16 bytes: vector loads
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int k = lane; k < IC / 4; k += 32) {
      const float4 a = w4[k], b = x4[k];
      acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
  } else {
    for (int k = lane; k < IC; k += 32) acc += w[k] * x[k];
  }
  acc = warpSum(acc);
  if (lane == 0) y[o] = then(o, bias ? acc + bias[o] : acc);
}

// One query (qkvRow's q, NH heads of hs) against Tc cached keys and values (Tc, C): a block per
// head. pre[t2] = q·k[t2] / sqrt(hs); att = softmax(pre); out[hh·hs + d] = Σ att[t2]·v[t2][hh·hs + d].
constexpr int kDecodeThreads = 256;
constexpr int kDecodeMaxPositions = 1024;  // GPT-2's context; checked by the caller
__global__ void __launch_bounds__(kDecodeThreads)
    attendOneRow(float* out, const float* qkvRow, const float* keys, const float* values, int Tc, int C, int hs,
                 float scale) {
  __shared__ float pre[kDecodeMaxPositions];
  __shared__ float scratch[kDecodeThreads / 32];
  __shared__ float partial[kDecodeThreads];
  const int hh = static_cast<int>(blockIdx.x), tid = static_cast<int>(threadIdx.x);
  const float* q = qkvRow + hh * hs;
  float m = -INFINITY;
  for (int t2 = tid; t2 < Tc; t2 += kDecodeThreads) {
    const float* k = keys + static_cast<osprey::Index>(t2) * C + hh * hs;
    float s = 0.0f;
    for (int d = 0; d < hs; ++d) s += q[d] * k[d];
    pre[t2] = s * scale;
    m = fmaxf(m, pre[t2]);
  }
  m = blockFold<true, kDecodeThreads>(m, scratch);
  float sum = 0.0f;
  for (int t2 = tid; t2 < Tc; t2 += kDecodeThreads) {
    pre[t2] = __expf(pre[t2] - m);
    sum += pre[t2];
  }
  sum = blockFold<false, kDecodeThreads>(sum, scratch);  // its barriers also publish pre[]
  const float inverse = 1.0f / sum;
  // Thread tid adds the positions t2 ≡ tid / hs (mod groups) for channel tid % hs.
  const int groups = kDecodeThreads / hs, d = tid % hs, group = tid / hs;
  float acc = 0.0f;
  if (group < groups)
    for (int t2 = group; t2 < Tc; t2 += groups) acc += pre[t2] * values[static_cast<osprey::Index>(t2) * C + hh * hs + d];
  partial[tid] = acc;
  __syncthreads();
  if (tid < hs) {
    float total = 0.0f;
    for (int g = 0; g < groups; ++g) total += partial[g * hs + tid];
    out[hh * hs + tid] = total * inverse;
  }
}

// The smallest index of the largest non-NaN value of x (n), as a float (exact below 2^24), or -1
// when every value is NaN. One block.
constexpr int kArgmaxThreads = 1024;
__global__ void __launch_bounds__(kArgmaxThreads) argmaxKernel(float* result, const float* x, int n) {
  __shared__ float bestValue[kArgmaxThreads];
  __shared__ int bestIndex[kArgmaxThreads];
  const int tid = static_cast<int>(threadIdx.x);
  float best = -INFINITY;
  int at = -1;
  for (int i = tid; i < n; i += kArgmaxThreads) {
    const float v = x[i];
    if (v == v && (at < 0 || v > best)) {  // ascending i: the first of equal values stays
      best = v;
      at = i;
    }
  }
  bestValue[tid] = best;
  bestIndex[tid] = at;
  __syncthreads();
  for (int stride = kArgmaxThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      const int j = bestIndex[tid + stride];
      const float v = bestValue[tid + stride];
      const int i = bestIndex[tid];
      if (j >= 0 && (i < 0 || v > bestValue[tid] || (v == bestValue[tid] && j < i))) {
        bestValue[tid] = v;
        bestIndex[tid] = j;
      }
    }
    __syncthreads();
  }
  if (tid == 0) *result = static_cast<float>(bestIndex[0]);
}

}  // namespace
}  // namespace gpt2::fast_kernels
