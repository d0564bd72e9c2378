// The flash attention forward with bf16 tiles on Hopper's warpgroup products (fast/wgmma.hpp):
// the same online softmax as flash_attention.hpp's flashForward, over the same 64-key tiles in the
// same order, with the two products of each tile (s = q·kᵀ, o += p·v) issued by a warpgroup of 64
// queries at once; its sums come out the same, bit for bit (each product's k-steps accumulate in
// the same order), which tests/cuda/fast_test.cu checks. nvcc units only.
//
// Why: flashForward's mma.sync products take every B fragment of k and v through ldmatrix into the
// registers, and its 255 registers a thread leave two warps a scheduler; Nsight Compute found it
// waiting on its own instructions, the tensor pipe mostly idle (bench/cuda/NOTES.md). Here the tensor cores
// read q, k and v from shared memory themselves, and p goes from the accumulator into the second
// product as its A operand without a store: 121 registers a thread, four warpgroups a
// multiprocessor, whose softmax and products overlap.
//
// A block is one warpgroup and its 64 queries; the k and v tiles, copied asynchronously from the
// bf16 twins in two stages, run up to the block's diagonal tile.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/flash_forward_wgmma.hpp is compiled by nvcc only"
#endif

#include "gpt2/fast/flash_attention.hpp"
#include "gpt2/fast/wgmma.hpp"

namespace gpt2::fast_kernels {

namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// One warpgroup (64 queries) a block and four blocks a multiprocessor, so that each warpgroup's
// barriers are its own: faster at the training shape than two warpgroups a block sharing each k
// and v tile (tools/profile/flash_kernels_probe.cu; bench/cuda/NOTES.md), though each tile is
// then copied in for half as many queries.
static_assert(kFlashThreads == 128, "a block of kFlashThreads threads is one warpgroup");
constexpr int kWgmmaBlocks = 4;  // blocks a multiprocessor
// The block's q tile, two stages of k and of v, and room to start them on a 1024-byte boundary
// (the 128-byte swizzle's pattern repeats every 8 rows of 128 bytes).
constexpr std::size_t kWgmmaForwardShared = 5 * kTileElements * sizeof(__nv_bfloat16) + 1024;

// out (B, T, C) and lse (B, NH, T) as flashForward<Bf16Tiles> defines them. Grid (query tiles,
// B·NH), the longest tiles first; block i (one warpgroup, warp w owning queries 16w .. 16w + 15
// of its tile) visits the key tiles 0 .. i, the last its diagonal.
__global__ void __launch_bounds__(kFlashThreads, kWgmmaBlocks)
    flashForwardWgmma(TileSource qkv, OutputPlaces out, float* lse, int T, int C, int NH, float scaleLog2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using K = Bf16Tiles;
  using E = __nv_bfloat16;
  extern __shared__ __align__(16) unsigned char shared[];
  E* sQ = reinterpret_cast<E*>(wgmma::swizzleAligned(shared));  // the block's q tile
  E* sK = sQ + kTileElements;                                    // two stages of k
  E* sV = sK + 2 * kTileElements;                                // and of v
  const int tile = static_cast<int>(gridDim.x - 1 - blockIdx.x), q0 = tile * kFlashTile;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, c = lane % 4;
  const HeadPlace head = headPlace(T, C, NH);
  const TileSource q = qkv.at(head.wide);
  const auto fetchKeys = [&](int kt, int stage) {
    fetchKeyTile<K>(sK + stage * kTileElements, sV + stage * kTileElements, q, head, C, kt, T);
  };
  fetchTile<K>(sQ, q, head.ld, q0, T);
  fetchKeys(0, 0);
  commitCopies();
  awaitCopies<0>();
  wgmma::sharedWritesVisible();
  __syncthreads();
  // q (sQ) is the first product's A, read from shared memory by the products themselves. (Its
  // fragments held in the registers across the loop, as flashForward holds them, gave wrong
  // products from the second key tile on with CUDA 13.0's ptxas; A operands in the registers here
  // are each written just before the product that reads them.)
  const int rowA = q0 + warp * 16 + g;  // the lane's rows: rowA and rowA + 8
  float o[8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  for (int kt = 0; kt <= tile; ++kt) {
    const int stage = kt & 1;
    if (kt < tile) fetchKeys(kt + 1, stage ^ 1);  // into the stage every warp finished at kt - 1
    commitCopies();
    awaitCopies<1>();  // this stage's copies are in
    wgmma::sharedWritesVisible();
    __syncthreads();
    const E* k = sK + stage * kTileElements;
    const E* v = sV + stage * kTileElements;
    float s[8][4];  // written whole by the first k-step (accumulate = false)
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks)  // s = q·kᵀ: q's and k's rows both run along the product's k
      wgmma::product64Shared<0>(s, wgmma::descriptor(sQ + 16 * ks), wgmma::descriptor(k + 16 * ks), ks > 0);
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::pin(s);
    if (kt == tile) maskFuture<true>(s, kt * kFlashTile, rowA, rowA + 8, c, -INFINITY);  // the diagonal tile
    onlineSoftmax(s, m, l, o, scaleLog2);
    typename K::Fragment p[K::kSteps];  // p rounded to bf16, as flashForward's heldA
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks) K::heldA(p[ks], s, ks);
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks)  // o += p·v: v's rows (keys) are the product's k
      wgmma::product64<1>(o, p[ks].r, wgmma::descriptor(v + 16 * kFlashHead * ks), true);
    wgmma::commit();
    wgmma::wait<0>();  // before the barrier that lets this stage be refilled
    wgmma::pin(o);
    __syncthreads();
  }
  finishRows(out, lse, head, o, m, l, rowA, T, C, c);
#else
  __trap();  // built without sm_90a: the host launches this only where wgmmaReady()
#endif
}

}  // namespace

// flashAttentionForward<Bf16Tiles>'s result on the warpgroup kernel; wgmmaReady() holds.
inline osprey::Result<void> flashAttentionForwardWgmma(cudaStream_t stream, TileSource qkv, OutputPlaces out,
                                                       float* lse, osprey::Index B, osprey::Index T, osprey::Index C,
                                                       osprey::Index NH) {
  if (B == 0 || T == 0) return {};
  OSPREY_CHECK(flash_detail::tilesAligned<Bf16Tiles>("flashForwardWgmma", "qkv", qkv));
  OSPREY_CHECK(flash_detail::placesAligned("flashForwardWgmma", out));
  OSPREY_CHECK(flash_detail::aligned("flashForwardWgmma", "lse", lse, 4));
  OSPREY_CUDA_CHECK(allowShared(flashForwardWgmma, kWgmmaForwardShared), "flash attention: shared memory");
  flashForwardWgmma<<<dim3(flash_detail::tiles(T), static_cast<unsigned>(B * NH)), kFlashThreads,
                      kWgmmaForwardShared, stream>>>(qkv, out, lse, static_cast<int>(T), static_cast<int>(C),
                                                     static_cast<int>(NH), flash_detail::scaleLog2());
  OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention launch");
  return {};
}

}  // namespace gpt2::fast_kernels
