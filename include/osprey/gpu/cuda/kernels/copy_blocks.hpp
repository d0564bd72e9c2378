// The strided block copy (transposes, attention's heads) through 32 x 32 shared tiles.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/copy_blocks.hpp is compiled by nvcc only (a .cu file)"
#endif

#include "osprey/block_layout.hpp"
#include "osprey/config.hpp"

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

// out (blocks, rows, cols) = the blocks of src that `layout` describes, 32 x 32 tiles at a time
// through shared memory: the tile is read along the source's unit stride (down its rows when
// alongRows, a transpose) and written along the copy's rows, so both sides coalesce. Only copies.
constexpr int kCopyTile = 32;
constexpr int kCopyThreads = 256;  // 32 x 8: each thread moves four elements of a tile
constexpr int kCopyBlocksPerProcessor = 16;

template <class T>
__global__ void __launch_bounds__(kCopyThreads)
    copyBlocksKernel(T* out, const T* src, BlockLayout layout, Index blocks, Index rows, Index cols, bool alongRows) {
  __shared__ T tile[kCopyTile][kCopyTile + 1];
  const int tx = static_cast<int>(threadIdx.x) % kCopyTile, ty = static_cast<int>(threadIdx.x) / kCopyTile;
  constexpr int kPass = kCopyThreads / kCopyTile;
  const Index tilesC = (cols + kCopyTile - 1) / kCopyTile, perBlock = tilesC * ((rows + kCopyTile - 1) / kCopyTile);
  for (Index t = blockIdx.x; t < blocks * perBlock; t += gridDim.x) {
    const Index z = t / perBlock, within = t % perBlock;
    const Index r0 = within / tilesC * kCopyTile, c0 = within % tilesC * kCopyTile, start = layout.start(z);
    for (int k = ty; k < kCopyTile; k += kPass) {
      const int rl = alongRows ? tx : k, cl = alongRows ? k : tx;
      const Index r = r0 + rl, c = c0 + cl;
      if (r < rows && c < cols) tile[rl][cl] = src[start + r * layout.rowStride + c * layout.colStride];
    }
    __syncthreads();
    for (int k = ty; k < kCopyTile; k += kPass) {
      const Index r = r0 + k, c = c0 + tx;
      if (r < rows && c < cols) out[(z * rows + r) * cols + c] = tile[k][tx];
    }
    __syncthreads();  // the tile is written out before the next is read in
  }
}

}  // namespace
}  // namespace osprey::cuda_detail
