// Which warps of two blocks on one multiprocessor share a tensor core: the row products choose
// their computing warp by `%warpid % 4` (row_dmma.hpp: a warp slot's quarter of the
// multiprocessor), and two LayerNorm blocks of one launch on one multiprocessor were found slow
// together (bench/cuda/NOTES.md, fifty-first and fifty-second runs), where tickets that should
// have put them on two quarters made nearly every pair slow. This probe runs the chain alone.
//
// Each block has four warps (the row products' 128 threads) and records every warp's %warpid; one
// warp of it runs Steps dependent m16n8k16 f64 mma steps (the LayerNorm's 96 and the fc
// projection's 192 are the chains in question), the others wait at the block's barrier. Two waves
// of blocks, one block a multiprocessor each (shared memory sized so that two fit and not three),
// so that the second wave's block k shares its multiprocessor with some first-wave block: the
// first wave's computing warp is warp A, the second's warp B, for every A and B in 0..3. Each
// pair that ran at once (their chains overlapping most of their length) is counted by whether its
// two computing warps had the same %warpid % 4; the table's rows give their warp indices.
//
//   nvcc -std=c++20 -O3 -arch=sm_90a -I include -o quarter_probe tools/profile/quarter_probe.cu
//   ./quarter_probe [PAIRS.txt]
//
// Prints, for each (A, B): the pairs found, and the median cycles a step of pairs whose warps' slots
// agree modulo 4 and of those that do not; then the %warpid values seen (0 .. 63 would be the
// multiprocessor's slots; 0 .. 3 a block's own numbering, which would make `% 4` name no quarter).
// PAIRS.txt, when named, gets every two-block pair's slots and cycles, whichever model they fit.
// Then the same question inside one block of sixteen warps, where no scheduling of other blocks
// intervenes: the median step of warps i and j at once, for every i < j, and each index's %warpid.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "osprey/gpu/cuda/kernels/row_dmma.hpp"
#include "probe_check.hpp"
#include "probe_clock.hpp"

constexpr int kThreads = 128;
constexpr int kSteps = 192;

struct BlockRecord {
  unsigned sm, slot[kThreads / 32];
  long long cycles;                      // the chain's, on its multiprocessor's clock
  unsigned long long start, end;         // %globaltimer around the chain, ns
  double out;                            // the chain's first output (so that it is not optimised away)
};

using osprey::cuda_detail::multiprocessorId;
using osprey::cuda_detail::warpSlot;

// The calling warp's %warpid into slots[its index in the block] (lane 0).
__device__ __forceinline__ void noteSlot(unsigned* slots) {
  if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = warpSlot();
}

// One chain of kSteps dependent steps on the calling warp, timed on both clocks.
struct ChainRun {
  long long cycles;
  unsigned long long start, end;
  double out;
};
__device__ __forceinline__ ChainRun runChain() {
  const int lane = static_cast<int>(threadIdx.x % 32);
  double a[8], b[4], d[4] = {0.0, 0.0, 0.0, 0.0};
  for (int i = 0; i < 8; ++i) a[i] = 1.0 + 0x1p-20 * (lane + i);
  for (int i = 0; i < 4; ++i) b[i] = 1.0 - 0x1p-21 * (lane + i);
  ChainRun run;
  run.start = globalNs();
  const long long c0 = clock64();
#pragma unroll 8
  for (int s = 0; s < kSteps; ++s) osprey::cuda_detail::dmma16816(d, a, b);
  run.cycles = clock64() - c0;
  run.end = globalNs();
  run.out = d[0];
  return run;
}

// Blocks below `firstWave` compute on warp `warpA`, the others on `warpB`.
__global__ void __launch_bounds__(kThreads, 1) pairChains(int firstWave, int warpA, int warpB, BlockRecord* records) {
  __shared__ unsigned slots[kThreads / 32];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  noteSlot(slots);
  __syncthreads();
  const int computing = static_cast<int>(blockIdx.x) < firstWave ? warpA : warpB;
  BlockRecord& r = records[blockIdx.x];
  if (warp == computing) {
    const ChainRun run = runChain();
    if (lane == 0) {
      r.sm = multiprocessorId();
      for (int w = 0; w < kThreads / 32; ++w) r.slot[w] = slots[w];
      r.cycles = run.cycles;
      r.start = run.start;
      r.end = run.end;
      r.out = run.out;
    }
  }
  __syncthreads();
}

// One block a multiprocessor of kWide warps: warps i and j (i < j) each run the chain at once, the
// others wait at the barrier. Two warps whose steps slow each other share a quarter; the table says
// which by their index in the block and by their %warpid.
constexpr int kWide = 16;
struct WarpPairRecord {
  unsigned sm, slot[kWide];
  long long cycles[2];
  double out[2];  // the chains' first outputs (so that they are not optimised away)
};
__global__ void __launch_bounds__(kWide * 32, 1) twoWarpChains(int wi, int wj, WarpPairRecord* records) {
  __shared__ unsigned slots[kWide];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  noteSlot(slots);
  __syncthreads();
  WarpPairRecord& r = records[blockIdx.x];
  if (warp == wi || warp == wj) {
    const ChainRun run = runChain();
    if (lane == 0) {
      r.cycles[warp == wi ? 0 : 1] = run.cycles;
      r.out[warp == wi ? 0 : 1] = run.out;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    r.sm = multiprocessorId();
    for (int w = 0; w < kWide; ++w) r.slot[w] = slots[w];
  }
}

// Within one block: the median cycles a step of warps i and j at once, for every pair, and the
// %warpid each warp index had.
void withinOneBlock(int sms) {
  WarpPairRecord* records = nullptr;
  CHECK(cudaMalloc(&records, sizeof(WarpPairRecord) * sms));
  std::vector<WarpPairRecord> host(static_cast<std::size_t>(sms));
  std::printf("\nwithin one block of %d warps (one block a multiprocessor): median cycles a step of warp i and j "
              "at once\n   i\\j", kWide);
  for (int j = 0; j < kWide; ++j) std::printf(" %5d", j);
  std::printf("\n");
  std::map<int, std::map<unsigned, int>> slotOfWarp;
  for (int i = 0; i < kWide; ++i) {
    std::printf("%6d ", i);
    for (int j = 0; j < kWide; ++j) {
      if (j <= i) {
        std::printf(" %5s", "");
        continue;
      }
      twoWarpChains<<<sms, kWide * 32>>>(i, j, records);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(host.data(), records, sizeof(WarpPairRecord) * sms, cudaMemcpyDeviceToHost));
      std::vector<double> steps;
      for (const WarpPairRecord& r : host) {
        steps.push_back(static_cast<double>(std::max(r.cycles[0], r.cycles[1])) / kSteps);
        for (int w = 0; w < kWide; ++w) ++slotOfWarp[w][r.slot[w]];
      }
      std::sort(steps.begin(), steps.end());
      std::printf(" %5.1f", steps[steps.size() / 2]);
    }
    std::printf("\n");
  }
  std::printf("%%warpid of each warp index (value: count):\n");
  for (const auto& [w, seen] : slotOfWarp) {
    std::printf("  warp %2d:", w);
    for (const auto& [slot, count] : seen) std::printf(" %u:%d", slot, count);
    std::printf("\n");
  }
  CHECK(cudaFree(records));
}

int main(int argc, char** argv) {
  // argv[1], when given: a file for every pair of the two-block runs, one line each.
  FILE* raw = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  if (raw != nullptr)
    std::fprintf(raw, "warpA warpB repeat sm blockX blockY slotsX(4) slotsY(4) cyclesX cyclesY overlap_ns\n");
  int device = 0, sms = 0, perSm = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CHECK(cudaDeviceGetAttribute(&perSm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  // Two blocks fit a multiprocessor's shared memory and three do not (1 KB of each is the system's).
  const int shared = perSm / 3 + 2048;
  CHECK(cudaFuncSetAttribute(pairChains, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
  const int blocks = 2 * sms;
  BlockRecord* records = nullptr;
  CHECK(cudaMalloc(&records, sizeof(BlockRecord) * blocks));
  std::vector<BlockRecord> host(static_cast<std::size_t>(blocks));
  std::map<unsigned, int> slotsSeen;
  std::printf("%d multiprocessors, %d bytes of shared memory a block (two a multiprocessor), %d steps a chain\n", sms,
              shared, kSteps);
  std::printf("warpA warpB  pairs  same-slot%%4: n  cycles/step   other: n  cycles/step   alone: n  cycles/step\n");
  for (int warpA = 0; warpA < 4; ++warpA) {
    for (int warpB = 0; warpB < 4; ++warpB) {
      std::vector<double> same, other, alone;
      for (int repeat = 0; repeat < 5; ++repeat) {
        CHECK(cudaMemset(records, 0, sizeof(BlockRecord) * blocks));
        pairChains<<<blocks, kThreads, shared>>>(sms, warpA, warpB, records);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(host.data(), records, sizeof(BlockRecord) * blocks, cudaMemcpyDeviceToHost));
        std::map<unsigned, std::vector<int>> bySm;
        for (int i = 0; i < blocks; ++i) {
          bySm[host[i].sm].push_back(i);
          for (const unsigned s : host[i].slot) ++slotsSeen[s];
        }
        for (const auto& [sm, ids] : bySm) {
          if (ids.size() == 1) {
            alone.push_back(static_cast<double>(host[ids[0]].cycles) / kSteps);
            continue;
          }
          if (ids.size() != 2) continue;
          const BlockRecord &x = host[ids[0]], &y = host[ids[1]];
          const unsigned long long lo = std::max(x.start, y.start), hi = std::min(x.end, y.end);
          const unsigned long long shorter = std::min(x.end - x.start, y.end - y.start);
          const int cx = ids[0] < sms ? warpA : warpB, cy = ids[1] < sms ? warpA : warpB;
          if (raw != nullptr) {
            std::fprintf(raw, "%d %d %d %u %d %d", warpA, warpB, repeat, sm, ids[0], ids[1]);
            for (const unsigned v : x.slot) std::fprintf(raw, " %u", v);
            for (const unsigned v : y.slot) std::fprintf(raw, " %u", v);
            std::fprintf(raw, " %lld %lld %lld\n", x.cycles, y.cycles, static_cast<long long>(hi > lo ? hi - lo : 0));
          }
          if (hi <= lo || (hi - lo) * 4 < shorter * 3) continue;  // not at once for most of their length
          auto& into = x.slot[cx] % 4 == y.slot[cy] % 4 ? same : other;
          into.push_back(static_cast<double>(x.cycles) / kSteps);
          into.push_back(static_cast<double>(y.cycles) / kSteps);
        }
      }
      const auto median = [](std::vector<double> v) {
        if (v.empty()) return 0.0;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::printf("%5d %5d  %5zu  %14zu  %11.1f  %8zu  %11.1f  %8zu  %11.1f\n", warpA, warpB,
                  (same.size() + other.size()) / 2, same.size() / 2, median(same), other.size() / 2, median(other),
                  alone.size(), median(alone));
    }
  }
  std::printf("%%warpid values seen (value: count):");
  for (const auto& [slot, count] : slotsSeen) std::printf(" %u:%d", slot, count);
  std::printf("\n");
  CHECK(cudaFree(records));
  if (raw != nullptr) std::fclose(raw);
  withinOneBlock(sms);
  return 0;
}
