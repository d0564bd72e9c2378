// A strided gather's layout: where element (r, c) of block z lies in a flat source.
//
// Blocks are numbered z = o·inner + k (k < inner): block z starts at o·outerStride + k·innerStride
// + offset, and its element (r, c) is rowStride·r + colStride·c further on. A transpose is one
// block with rowStride 1; the heads of a batch of activations are blocks of `inner` heads a
// batch. A handler that copies such blocks itself (copyBlocks: the cuda device's tiled copy)
// reads the source along whichever stride is 1 and writes the copy along its rows.
#pragma once

#include <fmt/format.h>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace osprey {

struct BlockLayout {
  Index inner = 1, outerStride = 0, innerStride = 0, offset = 0, rowStride = 0, colStride = 1;

  OSPREY_FN Index start(Index z) const { return (z / inner) * outerStride + (z % inner) * innerStride + offset; }
  OSPREY_FN Index at(Index z, Index r, Index c) const { return start(z) + r * rowStride + c * colStride; }
};

// An Error unless every element of `blocks` (rows x cols) blocks lies in a source of `length`
// elements: strides and offset non-negative, and the farthest element inside.
inline Result<void> checkBlockLayout(const BlockLayout& l, Index length, Index blocks, Index rows, Index cols) {
  if (blocks < 0 || rows < 0 || cols < 0 || l.inner <= 0 || l.outerStride < 0 || l.innerStride < 0 || l.offset < 0 ||
      l.rowStride < 0 || l.colStride < 0)
    return Error{fmt::format("copyBlocks: a negative size or stride ({} blocks of {} x {}; inner {}, strides {}, {}, "
                             "{}, {}, offset {})",
                             blocks, rows, cols, l.inner, l.outerStride, l.innerStride, l.rowStride, l.colStride,
                             l.offset)};
  if (blocks == 0 || rows == 0 || cols == 0) return {};
  const Index lastInner = blocks - 1 < l.inner - 1 ? blocks - 1 : l.inner - 1;
  Index far = l.offset, step = 0;
  const auto grow = [&](Index count, Index stride) {
    return __builtin_mul_overflow(count, stride, &step) || __builtin_add_overflow(far, step, &far);
  };
  const bool overflow = grow((blocks - 1) / l.inner, l.outerStride) || grow(lastInner, l.innerStride) ||
                        grow(rows - 1, l.rowStride) || grow(cols - 1, l.colStride);
  if (overflow || far >= length)
    return Error{fmt::format("copyBlocks: {} blocks of {} x {} reach past the source's {} elements", blocks, rows, cols,
                             length)};
  return {};
}

}  // namespace osprey
