// GELU forward and backward as by-fours bodies, and the backward with its output's column sums.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/gelu.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "gpt2/fast/fast_math.hpp"       // fastExp2, fastReciprocal
#include "gpt2/fast/kernels/by_fours.hpp"
#include "gpt2/fast/kernels/layernorm.hpp"  // ColumnSets, columnTotals
#include "gpt2/fast/kernels/row_walks.hpp"
#include "gpt2/fast/shape_support.hpp"  // geluSumsWidthFits
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// GELU (tanh form), forward and backward, as byFoursKernel bodies (16 bytes a load where aligned).
//   u = sqrt(2/pi)·(x + 0.044715·x³);  gelu = 0.5·x·(1 + tanh u)
//   gelu' = 0.5·(1 + tanh u) + 0.5·x·(1 - tanh² u)·sqrt(2/pi)·(1 + 3·0.044715·x²)
constexpr float kGeluScaleF = 0.7978845608028654f, kGeluCubicF = 0.044715f;
// Each writes its output's bf16 rounding into `twin` too where one is given: GELU's output is the
// fc projection's input, its gradient the fc layer's dout. A null output writes the twin alone
// (FastHandler::twinOnly).
//
// The kernels compute those formulas through an identity rather than through tanhf:
//   g = 0.5·(1 + tanh u) = 1 / (1 + e),  e = exp(-2u)      (the logistic function of 2u)
//   gelu = x·g;   0.5·(1 - tanh² u) = 2·g·(1 - g) = 2·e·g²,  so  gelu' = g·(1 + 2·x·e·g·du)
// with du = sqrt(2/pi)·(1 + 3·0.044715·x²): one exponential and one reciprocal (ex2.approx,
// rcp.approx: a few parts in 10^7) and no cancellation. CUDA's tanhf, with its branch for small
// |u|, left GELU's kernels waiting on their instructions rather than on memory (Nsight Compute's
// counts: bench/cuda/NOTES.md). exp(-2u) = inf (x below about -10) gives
// g = 0 and gelu = -0, as 0.5·x·(1 + tanh u) does; exp(-2u) = 0 gives g = 1. Subnormal values
// are flushed: they arise only where g is 0 or 1 anyway.
// exp(-2u) = 2^(x·(a + b·x²)), the constants holding -2·log2(e)·sqrt(2/pi) (and 0.044715).
constexpr float kGeluExp2F = -2.0f * 1.4426950408889634f * kGeluScaleF, kGeluExp2CubicF = kGeluExp2F * kGeluCubicF;
struct GeluGate {
  float e, g;  // exp(-2u), and 1 / (1 + exp(-2u))
};
__device__ __forceinline__ GeluGate geluGate(float v) {
  const float e = fastExp2(v * fmaf(kGeluExp2CubicF, v * v, kGeluExp2F));
  return {e, fastReciprocal(1.0f + e)};
}
__device__ __forceinline__ float geluOf(float v) { return v * geluGate(v).g; }
__device__ __forceinline__ float geluSlope(float v) {
  const auto [e, g] = geluGate(v);
  const float du = fmaf(kGeluScaleF * 3.0f * kGeluCubicF, v * v, kGeluScaleF);
  const float w = fminf(e * g, 1.0f);  // e·g = 1 - g; where e = inf, inf·0 would be NaN, not 1
  return g * fmaf(2.0f * v, w * du, 1.0f);
}
// GELU's input x (and the backward's dout) as floats, or as bf16 values (a buffer stored as bf16:
// FastHandler::withElements), read four at a time as 16 or 8 bytes.
__device__ __forceinline__ float valueOf(float v) { return v; }
__device__ __forceinline__ float valueOf(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float4 fourAt(const float* x, osprey::Index q) {
  return reinterpret_cast<const float4*>(x)[q];
}
__device__ __forceinline__ float4 fourAt(const __nv_bfloat16* x, osprey::Index q) {
  const uint2 r = reinterpret_cast<const uint2*>(x)[q];
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
template <class X = float>
struct GeluForwardBody {
  float* y;
  const X* x;
  __nv_bfloat16* twin = nullptr;
  __device__ __forceinline__ void operator()(osprey::Index i) const {
    const float out = geluOf(valueOf(x[i]));
    if (y) y[i] = out;
    if (twin) twin[i] = __float2bfloat16_rn(out);
  }
  __device__ __forceinline__ void four(osprey::Index q) const {
    const float4 v = fourAt(x, q);
    const float4 out = make_float4(geluOf(v.x), geluOf(v.y), geluOf(v.z), geluOf(v.w));
    if (y) reinterpret_cast<float4*>(y)[q] = out;
    if (twin) storeBf16Four(twin + 4 * q, out);
  }
  bool aligned() const {
    return alignedTo(y, 16) && alignedTo(x, 4 * sizeof(X)) && alignedTo(twin, 8);
  }
};
template <class X = float, class D = float>
struct GeluBackwardBody {
  float* dx;
  const D* dout;
  const X* x;
  __nv_bfloat16* twin = nullptr;
  __device__ __forceinline__ void operator()(osprey::Index i) const {
    const float out = valueOf(dout[i]) * geluSlope(valueOf(x[i]));
    if (dx) dx[i] = out;
    if (twin) twin[i] = __float2bfloat16_rn(out);
  }
  __device__ __forceinline__ void four(osprey::Index q) const {
    const float4 v = fourAt(x, q), d = fourAt(dout, q);
    const float4 out = make_float4(d.x * geluSlope(v.x), d.y * geluSlope(v.y), d.z * geluSlope(v.z),
                                   d.w * geluSlope(v.w));
    if (dx) reinterpret_cast<float4*>(dx)[q] = out;
    if (twin) storeBf16Four(twin + 4 * q, out);
  }
  bool aligned() const {
    return alignedTo(dx, 16) && alignedTo(dout, 4 * sizeof(D)) && alignedTo(x, 4 * sizeof(X)) && alignedTo(twin, 8);
  }
};

// Eight consecutive elements of one of GELU's operands as loaded: one 16-byte vector of bf16 or
// two of floats, kept packed until the row is computed, so that a row's loads wait in the fewest
// registers and take one instruction per 16 bytes. floats(v) gives them as floats, in order.
template <class E>
struct EightLoaded;
template <>
struct EightLoaded<__nv_bfloat16> {
  uint4 raw;  // elements 2k and 2k + 1 in word k, the first in the low half
  __device__ __forceinline__ void load(const __nv_bfloat16* at) { raw = __ldg(reinterpret_cast<const uint4*>(at)); }
  __device__ __forceinline__ void floats(float (&v)[8]) const {
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 pair = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[k]));
      v[2 * k] = pair.x, v[2 * k + 1] = pair.y;
    }
  }
};
template <>
struct EightLoaded<float> {
  float4 lo, hi;
  __device__ __forceinline__ void load(const float* at) {
    lo = __ldg(reinterpret_cast<const float4*>(at)), hi = __ldg(reinterpret_cast<const float4*>(at) + 1);
  }
  __device__ __forceinline__ void floats(float (&v)[8]) const {
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
  }
};
// The bits of __floats2bfloat162_rn(a, b) (storeBf16Four's roundings), a in the low half: four of
// them make a group's 16-byte store of the twin.
__device__ __forceinline__ unsigned bf16PairBits(float a, float b) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const unsigned*>(&pair);
}
// A thread's loads of one row for geluBackwardSummed: x and dout of its groups j = 0 .. G - 1.
template <class X, class D, int G>
struct GeluSumRow {
  EightLoaded<X> x[G];
  EightLoaded<D> dout[G];
};

// GELU's backward over N rows of `width` with the column sums of its output, dx = dout·gelu'(x):
// dx is the fc layer's dout, and its column sums that layer's bias gradient, so they are taken
// here, where the values are in the registers, and no pass of their own reads dx again. The sums
// are of the float values (not of the twin's roundings), in the LayerNorm backward's two stages:
// a block walks rows blockIdx, blockIdx + gridDim, ..., thread t taking the 8-column groups t,
// t + kSumThreads, ... of each row (G of them: registers for the groups it has, no more) and
// adding them into its own sums, row after row; then it writes them to partials[blockIdx] (width
// floats), which columnTotals adds in block order.
// The rows are pipelined: a thread holds two rows' loads, in register sets a and b, and issues row
// n + gridDim's loads before it computes row n, so the memory is not left idle while a block
// computes and stores. With one row in flight it was, between rows, and the kernel ran well
// behind the elementwise GeluBackwardBody over the same data (bench/cuda/NOTES.md). The sets are
// named, not indexed by the row (a register array indexed at run time lives in local memory):
// the loop takes two rows a pass, a's then b's,
// so every column still adds its rows in ascending order, and the sums are those of one row at a
// time, bit for bit.
// width is a multiple of 8 of at most 8·kSumThreads·kSumGroups, every operand on 16 bytes
// (geluSumsFit); dx or twin may be null, as in GeluBackwardBody, whose values these are.
// Rows up to 7,168 wide: GPT-2's 4C takes 3 groups a thread at 124M, 4 at 350M, 5 at 774M and 7 at 1558M.
constexpr int kSumThreads = 128, kSumGroups = 7;
static_assert(8 * kSumThreads * kSumGroups == fast_shapes::kGeluSumsMaxWidth, "the widths shape_support.hpp says fit");
// The most groups a thread takes from these operands: 5 where both are floats (shape_support.hpp).
template <class X, class D>
inline constexpr int kSumGroupsFor = std::is_same_v<X, float> && std::is_same_v<D, float> ? 5 : kSumGroups;
static_assert(8 * kSumThreads * kSumGroupsFor<float, float> == fast_shapes::kGeluSumsMaxFloatWidth,
              "the widths shape_support.hpp says fit");
// Whether rows of `width` from these operands fit geluBackwardSummed (its outputs, dx and the twin,
// are fresh allocations: on 16 bytes, and so are their rows then).
template <class X, class D>
inline bool geluSumsFit(const D* dout, const X* x, osprey::Index width) {
  return fast_shapes::geluSumsWidthFits(width, kSumGroupsFor<X, D> < kSumGroups) && alignedTo(dout, 16) &&
         alignedTo(x, 16);
}
// G: the groups a thread takes, (width / 8) / kSumThreads rounded up (a larger G is only slower).
template <class X, class D, int G>
__global__ void __launch_bounds__(kSumThreads)
    geluBackwardSummed(float* __restrict__ dx, __nv_bfloat16* __restrict__ twin, float* __restrict__ partials,
                       const D* __restrict__ dout, const X* __restrict__ x, osprey::Index N, int width) {
  static_assert(1 <= G && G <= kSumGroups, "a thread takes 1 .. kSumGroups groups of a row");
  const int groups = width / 8;
  float sums[G][8] = {};
  // Row n's loads into `into`, issued, not waited on.
  const auto load = [&](GeluSumRow<X, D, G>& into, osprey::Index n) {
    const osprey::Index row = n * width;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int g = static_cast<int>(threadIdx.x) + j * kSumThreads;
      if (g < groups) into.x[j].load(x + row + 8 * g), into.dout[j].load(dout + row + 8 * g);
    }
  };
  // Row n from its loads: its values written to dx and twin and added into the sums.
  const auto finish = [&](const GeluSumRow<X, D, G>& from, osprey::Index n) {
    const osprey::Index row = n * width;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int g = static_cast<int>(threadIdx.x) + j * kSumThreads;
      if (g >= groups) continue;
      float v[8], d[8], out[8];
      from.x[j].floats(v), from.dout[j].floats(d);
#pragma unroll
      for (int k = 0; k < 8; ++k) out[k] = d[k] * geluSlope(v[k]);
      const osprey::Index at = row + 8 * g;
      if (dx) {
        float4* to = reinterpret_cast<float4*>(dx + at);
        to[0] = make_float4(out[0], out[1], out[2], out[3]);
        to[1] = make_float4(out[4], out[5], out[6], out[7]);
      }
      if (twin)
        *reinterpret_cast<uint4*>(twin + at) = make_uint4(bf16PairBits(out[0], out[1]), bf16PairBits(out[2], out[3]),
                                                          bf16PairBits(out[4], out[5]), bf16PairBits(out[6], out[7]));
#pragma unroll
      for (int k = 0; k < 8; ++k) sums[j][k] += out[k];
    }
  };
  const osprey::Index step = gridDim.x;
  GeluSumRow<X, D, G> a, b;
  osprey::Index n = blockIdx.x;
  if (n < N) load(a, n);
#pragma unroll 1
  for (; n < N; n += 2 * step) {  // a holds row n's loads
    if (n + step < N) load(b, n + step);
    finish(a, n);
    if (n + step >= N) break;
    if (n + 2 * step < N) load(a, n + 2 * step);
    finish(b, n + step);
  }
#pragma unroll
  for (int j = 0; j < G; ++j) {
    const int g = static_cast<int>(threadIdx.x) + j * kSumThreads;
    if (g >= groups) continue;
    float4* to = reinterpret_cast<float4*>(partials + static_cast<std::size_t>(blockIdx.x) * width + 8 * g);
    to[0] = make_float4(sums[j][0], sums[j][1], sums[j][2], sums[j][3]);
    to[1] = make_float4(sums[j][4], sums[j][5], sums[j][6], sums[j][7]);
  }
}

}  // namespace gpt2::fast_kernels
