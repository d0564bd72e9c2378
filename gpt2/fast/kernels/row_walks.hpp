// The fast row kernels' shared pieces: grids, alignment, bf16 stores, and the one warp walk over a
// row (and the LayerNorm statistics summed along it) that training and decoding share.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/kernels/row_walks.hpp is compiled by nvcc only"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <vector>

#include "gpt2/fast/causal_softmax.hpp"  // warpSum, warpMax
#include "gpt2/fast/shape_support.hpp"   // layernormHeldGroups
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {
namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

constexpr int kRowWarps = 8;      // LayerNorm: one warp per row, 8 rows per block
constexpr int kVocabThreads = 512;  // the cross-entropy backward (a block a row) and the lm head's correction

inline unsigned rowBlocks(osprey::Index rows) { return static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps); }

// Whether p lies on a multiple of `bytes`: where a kernel may read or write 16 bytes (four floats)
// or 8 (four bf16) at once. A null pointer (an output not asked for) counts as aligned.
__host__ __device__ __forceinline__ bool alignedTo(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}
// Four floats' bf16 roundings (nearest even) at `at`, 8-byte aligned, as two pairs.
__device__ __forceinline__ void storeBf16Four(__nv_bfloat16* at, float4 v) {
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(at);
  pairs[0] = __floats2bfloat162_rn(v.x, v.y);
  pairs[1] = __floats2bfloat162_rn(v.z, v.w);
}

// A warp's walk over a row of C floats in groups of four: lane l takes groups l, l + 32, ...
// (elements 4g .. 4g + 3), each in ascending order, calling f(c, value). With C a multiple of 4 and
// the row on 16 bytes a group is one vector load; otherwise element by element, in the same order.
// The LayerNorm sums below walk rows this way, so every kernel that normalises a row (the training
// layer and the one-row products of decoding) gets the same floats.
template <class F>
__device__ __forceinline__ void walkGroups(const float* row, int C, int lane, F f) {
  if (C % 4 == 0 && alignedTo(row, 16)) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll 4
    for (int g = lane; g < C / 4; g += 32) {
      const float4 v = row4[g];
      f(4 * g, v.x);
      f(4 * g + 1, v.y);
      f(4 * g + 2, v.z);
      f(4 * g + 3, v.w);
    }
    return;
  }
  for (int g = lane; 4 * g < C; g += 32)
    for (int c = 4 * g; c < 4 * g + 4 && c < C; ++c) f(c, row[c]);
}

// A row's LayerNorm statistics, summed by one warp (walkGroups' order; every lane gets the same
// bits, as warpSum's butterfly adds the same pairs on every lane):
// mean = Σx / C;  var = Σ(x - mean)² / C;  rstd = 1 / sqrt(var + eps)
// Rows of up to 32·Groups groups on 16 bytes are read once, into registers (`held`, group
// l + 32j of lane l in held[j]); longer or unaligned rows are walked twice, with the same sums.
// The fewest groups a lane holds (rows up to 768 floats, GPT-2 124M's width: 24 registers):
// decoding's rows, and the kernel that walks a training row no count holds.
constexpr int kHeldGroups = fast_shapes::kLayerNormHeldGroups[0];
template <int Groups = kHeldGroups>
struct HeldRow {
  float4 held[Groups];
  bool inRegisters = false;
};
// f(std::integral_constant<int, Groups>{}) with the groups a lane holds for a training LayerNorm's
// rows of C floats (fast_shapes::layernormHeldGroups), so every GPT-2 size reads its rows once, 16
// bytes at a time: a 1,280-float row walked twice took the LayerNorm backward over three times as
// long as its bytes (bench/RESULTS.md, thirty-ninth run). Rows no count holds take kHeldGroups,
// and are walked.
template <class F>
decltype(auto) withHeldGroups(int C, F f) {
  static_assert(std::size(fast_shapes::kLayerNormHeldGroups) == 4, "a case for each count of groups");
  switch (fast_shapes::layernormHeldGroups(C)) {
    case 8: return f(std::integral_constant<int, 8>{});
    case 10: return f(std::integral_constant<int, 10>{});
    case 13: return f(std::integral_constant<int, 13>{});
    default: return f(std::integral_constant<int, kHeldGroups>{});
  }
}
template <int Groups>
__device__ __forceinline__ float2 rowStatistics(const float* row, int C, float eps, HeldRow<Groups>& r) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int groups = C / 4;
  r.inRegisters = C % 4 == 0 && alignedTo(row, 16) && groups <= 32 * Groups;
  float sum = 0.0f, m = 0.0f, squares = 0.0f;
  const auto square = [&](float v) {
    const float d = v - m;
    squares += d * d;
  };
  if (r.inRegisters) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
#pragma unroll
    for (int j = 0; j < Groups; ++j)
      if (lane + 32 * j < groups) r.held[j] = row4[lane + 32 * j];
#pragma unroll
    for (int j = 0; j < Groups; ++j)
      if (lane + 32 * j < groups) sum = (((sum + r.held[j].x) + r.held[j].y) + r.held[j].z) + r.held[j].w;
    m = warpSum(sum) / static_cast<float>(C);
#pragma unroll
    for (int j = 0; j < Groups; ++j)
      if (lane + 32 * j < groups) {
        square(r.held[j].x);
        square(r.held[j].y);
        square(r.held[j].z);
        square(r.held[j].w);
      }
  } else {
    walkGroups(row, C, lane, [&](int, float v) { sum += v; });
    m = warpSum(sum) / static_cast<float>(C);
    walkGroups(row, C, lane, [&](int, float v) { square(v); });
  }
  return {m, rsqrtf(warpSum(squares) / static_cast<float>(C) + eps)};
}

}  // namespace
}  // namespace gpt2::fast_kernels
