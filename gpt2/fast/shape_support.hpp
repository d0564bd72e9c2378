// Which shapes the fast handler's kernels take, decided from the shape alone (and, for shared
// memory, the device's bytes a block): the handler asks these before it launches, and host tests
// ask them for every GPT-2 size (tests/gpt2/fast_shapes_test.cpp), so that a shape a kernel cannot
// take is an error naming the kernel before anything runs, never a wrong answer, and the path
// each size takes is known without a GPU. No CUDA here: nvcc units (gpt2/fast/) and host tests
// include it alike; the kernels' own constants are checked against these where they are defined.
//
// Every GPT-2 size (124M, 350M, 774M, 1558M: head size 64; widths 768, 1024, 1280, 1600; 12, 16,
// 20, 25 heads) takes flash attention, the fused one-row decoding kernels and the LayerNorm
// backward with all three sets of column sums. The limits below are for shapes beyond those.
// Offsets into a buffer that follow from the shape (flash attention's saved state) are decided
// here too, so that host tests check their alignment for every size: 1558M's 25 heads make
// B·NH·T odd for B = 1 and odd T, where the widths alone (multiples of 64) stay aligned.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "gpt2/model/config.hpp"

namespace gpt2::fast_shapes {

using osprey::Index;

// Flash attention (fast/flash_attention.hpp, flash_*_wgmma.hpp) is written for heads of 64
// channels, one block per (batch, head) in its grid's second dimension (at most 65535). Other
// shapes take per-head products around the fused causal softmax (fast/causal_softmax.hpp), which
// take any head size and count: slower, the same definitions.
inline constexpr Index kFlashHead = 64;
inline constexpr Index kFlashMaxGridHeads = 65535;
// Whether flash attention takes attention of this shape. Forward and backward decide alike, so
// the backward knows what the forward's att holds.
inline bool flashFits(Index B, Index C, Index NH) {
  return NH > 0 && C == NH * kFlashHead && B * NH <= kFlashMaxGridHeads && C <= (1 << 20);
}

// What flash attention's forward keeps for its backward (its att, one allocation of `size` floats;
// offsets in floats): the output's copy (B, T, C) at `out`, then each softmax row's log-sum-exp
// (B, NH, T) at `lse`. The output comes first, on the allocation's own 256 bytes (cudaMalloc's):
// the forward writes it and the backward's row dots read it 8 bytes at a time, and the next linear
// layer's TF32 product reads it as an operand (cuBLASLt's kernels may assume 256 bytes, its
// default). Every row (C floats, C a multiple of 64) and head (64 floats) then starts on 256 bytes
// too. The log-sum-exps are read a float at a time: any offset serves them. (With the log-sum-exps
// first, the output began B·NH·T floats in: 125 floats, 500 bytes, for GPT-2 1558M's 25 heads over
// a 5-token prompt, where the forward's 8-byte stores faulted as misaligned.)
inline constexpr std::size_t kFlashSavedAlignment = 256;  // bytes
struct FlashSaved {
  Index out = 0, lse = 0, size = 0;
};
inline FlashSaved flashSaved(Index B, Index T, Index C, Index NH) {
  const Index outputs = B * T * C;
  return {0, outputs, outputs + B * NH * T};
}
// Why the flash kernels cannot take this layout of their saved state (the kernel named), or
// nothing: the output's offset must keep it on kFlashSavedAlignment bytes.
inline std::optional<std::string> flashSavedProblem(const FlashSaved& s) {
  if (static_cast<std::size_t>(s.out) * sizeof(float) % kFlashSavedAlignment != 0)
    return fmt::format("fast flash attention (kernels flashForward, flashForwardWgmma, flashRowDots): the saved output "
                       "begins {} floats ({} bytes) into its allocation; the kernels' 8-byte stores and loads and the "
                       "next product need it on {} bytes",
                       s.out, static_cast<std::size_t>(s.out) * sizeof(float), kFlashSavedAlignment);
  return std::nullopt;
}

// Attention of one query against the cache while decoding (attendOneRow, fast/decode_kernels.hpp):
// a head's channels over 32 lanes of at most 8 each, so heads up to 256 wide.
inline constexpr Index kDecodeMaxHead = 256;
inline std::optional<std::string> decodeAttentionProblem(Index C, Index NH) {
  if (NH < 1 || C % NH != 0) return fmt::format("fast attention decode: {} heads do not divide {} channels", NH, C);
  if (C / NH > kDecodeMaxHead)
    return fmt::format("fast attention decode (kernel attendOneRow): heads of {} channels; it takes heads up to {} "
                       "wide",
                       C / NH, kDecodeMaxHead);
  return std::nullopt;
}

// A one-row linear layer with the LayerNorm before it inside (linearRow with RowNormalised,
// fast/decode_kernels.hpp): the normalised row in shared memory, at most 12 Ki floats (48 KiB,
// all a block has without opting in to more).
inline constexpr Index kMaxNormalisedRow = 12 * 1024;
inline std::optional<std::string> normalisedRowProblem(Index IC) {
  if (IC > kMaxNormalisedRow)
    return fmt::format("fast linear with its LayerNorm (kernel linearRow): a normalised row of {} floats; it takes "
                       "rows up to {}",
                       IC, kMaxNormalisedRow);
  return std::nullopt;
}

// The LayerNorm kernels (fast/kernels/layernorm.hpp, a warp a row) hold a row of C floats in
// registers, Groups groups of four a lane: the fewest of 6, 8, 10 and 13 that hold it (GPT-2's 768,
// 1024, 1280 and 1600), or 0 where none does (C not a multiple of 4, or past 1,664), and the row is
// walked twice, with the same sums in the same order (fast_kernels::withHeldGroups).
inline constexpr int kLayerNormHeldGroups[] = {6, 8, 10, 13};
inline int layernormHeldGroups(Index C) {
  if (C % 4 != 0) return 0;
  for (int groups : kLayerNormHeldGroups)
    if (C / 4 <= 32 * groups) return groups;
  return 0;
}

// The LayerNorm backward (layerNormBackward, fast/kernels/layernorm.hpp) keeps each of its 8 warps'
// column sums in shared memory, `sets` rows of C floats a warp: 3 (dw's, db's and dx's, the bias
// gradient of the linear layer before it), else 2, else 0: rows too wide for even two sets take
// the reference definition on the handler. sharedPerBlock: the device's opt-in bytes a block
// (kH200SharedPerBlock on an H100 or H200).
inline constexpr int kLayerNormBackwardWarps = 8;
inline constexpr std::size_t kH200SharedPerBlock = 232448;  // 227 KiB
inline std::size_t layernormBackwardShared(Index C, int sets) {
  return static_cast<std::size_t>(kLayerNormBackwardWarps) * static_cast<std::size_t>(sets) * sizeof(float) *
         static_cast<std::size_t>(C);
}
inline int layernormBackwardSets(Index C, std::size_t sharedPerBlock) {
  for (int sets : {3, 2})
    if (layernormBackwardShared(C, sets) <= sharedPerBlock) return sets;
  return 0;
}

// GELU's backward with its output's column sums (geluBackwardSummed, fast/kernels/gelu.hpp): rows
// whose width is a multiple of 8, at most 7168 (128 threads of 7 groups of 8: every GPT-2 size's
// 4C), or 5120 where both operands are floats (TF32 products: a group's loads take twice the
// registers, and past 5 groups a thread the kernel spills). Other rows take the elementwise
// backward, and the fc layer's bias gradient is then summed by its backward's products
// (FastHandler::matmulBackward): the same definition, another grouping.
inline constexpr Index kGeluSumsMaxWidth = 7168, kGeluSumsMaxFloatWidth = 5120;
inline bool geluSumsWidthFits(Index width, bool floatOperands = false) {
  return width % 8 == 0 && width <= (floatOperands ? kGeluSumsMaxFloatWidth : kGeluSumsMaxWidth);
}

// Why decoding a GPT-2 of config c on the fast handler cannot run (the kernel and the shape named),
// or nothing: asked before a continuation starts. Training and the full forward pass have no such
// limit (their kernels take any width a config allows: configProblem).
inline std::optional<std::string> decodingProblem(const Config& c) {
  if (auto problem = configProblem(c)) return problem;
  if (auto problem = decodeAttentionProblem(c.C, c.NH)) return problem;
  return normalisedRowProblem(c.C);  // ln_1 before qkv, ln_2 before fc, ln_f before the lm head
}

// The path each family of the fast handler's kernels takes for a GPT-2 of config c at batch B, on a
// device with sharedPerBlock bytes of shared memory a block.
struct Paths {
  bool flashAttention = false;      // else per-head products around the fused softmax
  int layernormHeldGroups = 0;      // 6, 8, 10, 13, or 0 (rows walked)
  int layernormBackwardSets = 0;    // 3, 2, or 0 (the reference definition)
  bool geluColumnSums = false;      // the fc bias gradient summed by GELU's backward
  std::optional<std::string> decoding;  // decodingProblem
};
inline Paths pathsFor(const Config& c, Index B, std::size_t sharedPerBlock = kH200SharedPerBlock) {
  return {flashFits(B, c.C, c.NH), layernormHeldGroups(c.C), layernormBackwardSets(c.C, sharedPerBlock),
          geluSumsWidthFits(4 * c.C), decodingProblem(c)};
}

}  // namespace gpt2::fast_shapes
