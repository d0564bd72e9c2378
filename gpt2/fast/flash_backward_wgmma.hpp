// The flash attention backward with bf16 tiles on Hopper's warpgroup products (fast/wgmma.hpp):
// flash_attention.hpp's flashBackwardKeys, with its four products a tile pair issued by the block's
// one warpgroup (its 64 keys) at once, then flashBackwardQueriesFromDs for dq as before. The same
// sums in the same order: dk, dv and the dsᵀ tiles come out the same, bit for bit, which
// tests/cuda/fast_test.cu checks. nvcc units only.
//
// Why: flashBackwardKeys was most of the flash backward's time at GPT-2's training shape
// (bench/cuda/NOTES.md), its B fragments loaded through ldmatrix for every product. Here the tensor cores read k, v, q and
// dout from shared memory themselves; pᵀ and dsᵀ go from the accumulators into the dv and dk
// products as A operands; and the two products that do not depend on each other (sᵀ = k·qᵀ and
// dpᵀ = v·doutᵀ) run together, the exponentials of pᵀ computed while dpᵀ is still running.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/flash_backward_wgmma.hpp is compiled by nvcc only"
#endif

#include "gpt2/fast/flash_attention.hpp"
#include "gpt2/fast/wgmma.hpp"

namespace gpt2::fast_kernels {

namespace {  // internal linkage (osprey/gpu/cuda/launch_faults.hpp says why)

// k and v, two stages of q and of dout (tiles on 1024-byte boundaries, for the 128-byte swizzle),
// then two stages of the queries' lse and Drow.
constexpr std::size_t kWgmmaKeysShared =
    6 * kTileElements * sizeof(__nv_bfloat16) + 4 * kFlashTile * sizeof(float) + 1024;

// dk and dv into sections 1 and 2 of dqkv, and the dsᵀ tiles, as flashBackwardKeys<Bf16Tiles>.
// Grid (key tiles, B·NH); block j (one warpgroup, warp w owning keys 16w .. 16w + 15 of its tile)
// visits the query tiles j, j + 1, ...
__global__ void __launch_bounds__(kFlashThreads, Bf16Tiles::kKeysBlocks)
    flashBackwardKeysWgmma(TileSource qkv, TileSource dout, const float* lse, const float* rowDot, OutputPlaces dqkv,
                           int T, int C, int NH, float scaleLog2, float scale, std::uint32_t* dsT) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using K = Bf16Tiles;
  using E = __nv_bfloat16;
  extern __shared__ __align__(16) unsigned char shared[];
  E* sTiles = reinterpret_cast<E*>(wgmma::swizzleAligned(shared));     // k, v, 2 stages of q, then of dout
  float* sStats = reinterpret_cast<float*>(sTiles + 6 * kTileElements);  // 2 stages of lse, then of Drow
  const int tile = static_cast<int>(blockIdx.x), k0 = tile * kFlashTile, tiles = static_cast<int>(gridDim.x);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, c = lane % 4;
  const HeadPlace head = headPlace(T, C, NH);
  const KeysBlockTiles<K> block(sTiles, sStats, head, qkv, dout, lse, rowDot, C, T);
  block.fetchOwn(tile);
  block.fetchQueries(tile, 0);
  commitCopies();
  const int keyA = k0 + warp * 16 + g, keyB = keyA + 8;
  float dk[8][4] = {}, dv[8][4] = {};
  for (int qt = tile; qt < tiles; ++qt) {
    const int q0 = qt * kFlashTile, stage = (qt - tile) & 1;
    if (qt + 1 < tiles) block.fetchQueries(qt + 1, stage ^ 1);  // into the stage every warp finished
    commitCopies();
    awaitCopies<1>();
    wgmma::sharedWritesVisible();
    __syncthreads();
    const E* sQ = block.sQueries + stage * kTileElements;
    const E* sO = block.sOuts + stage * kTileElements;
    const float* sLse = block.sLses + stage * kFlashTile;
    const float* sDot = block.sDots + stage * kFlashTile;
    // pᵀ = k·qᵀ and dpᵀ = v·doutᵀ, both operands' rows along the products' k (the head's columns).
    float p[8][4], dp[8][4];  // written whole by their first k-steps (accumulate = false)
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks)
      wgmma::product64Shared<0>(p, wgmma::descriptor(block.sK + 16 * ks), wgmma::descriptor(sQ + 16 * ks), ks > 0);
    wgmma::commit();
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks)
      wgmma::product64Shared<0>(dp, wgmma::descriptor(block.sV + 16 * ks), wgmma::descriptor(sO + 16 * ks), ks > 0);
    wgmma::commit();
    wgmma::wait<1>();  // pᵀ is in; dpᵀ may still be running
    wgmma::pin(p);
    // pᵀ[key][query] = exp2(s·log2 e - lse[query]); 0 where the query comes before the key.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) p[nt][e] = fastExp2(__fmaf_rn(p[nt][e], scaleLog2, -sLse[nt * 8 + 2 * c + (e & 1)]));
    if (qt == tile) maskFuture<false>(p, q0, keyA, keyB, c, 0.0f);
    typename K::Fragment pa[K::kSteps];  // pᵀ rounded to bf16, the dv product's A
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks) K::heldA(pa[ks], p, ks);
    wgmma::wait<0>();
    wgmma::pin(dp);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[nt][e] = p[nt][e] * (dp[nt][e] - sDot[nt * 8 + 2 * c + (e & 1)]);
    if (dsT) storeDsBlocks(dsT + dsTileAt(tiles, qt, tile), dp, warp, lane);  // for flashBackwardQueriesFromDs
    typename K::Fragment da[K::kSteps];  // dsᵀ rounded to bf16, the dk product's A
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks) K::heldA(da[ks], dp, ks);
    // dv += pᵀ·dout and dk += dsᵀ·q: dout's and q's rows (the queries) are the products' k.
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks)
      wgmma::product64<1>(dv, pa[ks].r, wgmma::descriptor(sO + 16 * kFlashHead * ks), true);
#pragma unroll
    for (int ks = 0; ks < K::kSteps; ++ks)
      wgmma::product64<1>(dk, da[ks].r, wgmma::descriptor(sQ + 16 * kFlashHead * ks), true);
    wgmma::commit();
    wgmma::wait<0>();  // before the barrier that lets this stage be refilled
    wgmma::pin(dv);
    wgmma::pin(dk);
    __syncthreads();
  }
  storeOutputRows(dqkv.at(head.wide + C), head.ld, dk, keyA, T, {scale, scale}, c,
                  warpSums(dqkv, head, 1, C, k0 + warp * 16, T));
  storeOutputRows(dqkv.at(head.wide + 2 * C), head.ld, dv, keyA, T, {1.0f, 1.0f}, c,
                  warpSums(dqkv, head, 2, C, k0 + warp * 16, T));
#else
  __trap();  // built without sm_90a: the host launches this only where wgmmaReady()
#endif
}

}  // namespace

// flashAttentionBackward<Bf16Tiles>'s result (dsT given) with the warpgroup keys kernel;
// wgmmaReady() holds.
inline osprey::Result<void> flashAttentionBackwardWgmma(cudaStream_t stream, TileSource dout, TileSource qkv,
                                                        const float* lse, const float* rowDot, OutputPlaces dqkv,
                                                        osprey::Index B, osprey::Index T, osprey::Index C,
                                                        osprey::Index NH, std::uint32_t* dsT) {
  if (B == 0 || T == 0) return {};
  OSPREY_CHECK(flash_detail::tilesAligned<Bf16Tiles>("flashBackwardKeysWgmma", "qkv", qkv));
  OSPREY_CHECK(flash_detail::tilesAligned<Bf16Tiles>("flashBackwardKeysWgmma", "dout", dout));
  OSPREY_CHECK(flash_detail::placesAligned("flashBackwardKeysWgmma", dqkv));
  OSPREY_CHECK(flash_detail::aligned("flashBackwardKeysWgmma", "lse", lse, 4));
  OSPREY_CHECK(flash_detail::aligned("flashBackwardKeysWgmma", "the row dots", rowDot, 4));
  OSPREY_CHECK(flash_detail::aligned("flashBackwardQueriesFromDs", "the dsT scratch", dsT, 16));
  const int Ti = static_cast<int>(T), Ci = static_cast<int>(C), NHi = static_cast<int>(NH);
  const dim3 grid(flash_detail::tiles(T), static_cast<unsigned>(B * NH));
  OSPREY_CUDA_CHECK(allowShared(flashBackwardKeysWgmma, kWgmmaKeysShared), "flash attention backward: shared memory");
  flashBackwardKeysWgmma<<<grid, kFlashThreads, kWgmmaKeysShared, stream>>>(
      qkv, dout, lse, rowDot, dqkv, Ti, Ci, NHi, flash_detail::scaleLog2(), flash_detail::scale(), dsT);
  OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention backward: keys launch");
  flashBackwardQueriesFromDs<<<grid, kFlashThreads, kFlashQueriesFromDsShared, stream>>>(qkv, dsT, dqkv, Ti, Ci, NHi,
                                                                                       flash_detail::scale());
  OSPREY_CUDA_CHECK(cudaGetLastError(), "flash attention backward: queries launch");
  return {};
}

}  // namespace gpt2::fast_kernels
