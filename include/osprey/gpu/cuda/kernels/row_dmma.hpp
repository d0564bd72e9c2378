// One row times a weight held transposed, on the FP64 tensor cores: the exact chains of one-token
// decoding in fewer cycles than the fma chain.
//
// A one-row product's outputs are each one chain of IC dependent steps (DESIGN.md §4), so its time
// is IC times one dependent step. tools/profile/dmma_shapes_probe.cu measured on the H200 that
// `mma.m16n8k16` with f64 operands, chained over k through its accumulator, is the ascending fma
// chain bit for bit (every regime, every K tried) and takes 82 cycles a step of 16 terms: 5.1 a
// term, against 8.4 for a dependent fma. So:
//   * warpChain runs one chain acc = fma(u[k], v[k], acc) on one warp: u in every row of A, v in
//     every column of B (every output is then that chain);
//   * rowDmmaKernel gives each block up to 16 rows of wT (OC x IC), repeated to fill A's 16: every
//     thread loads its share of the row into shared memory (one round trip to the L2, every load in
//     flight), the computing warp runs the prologue's chains if it has any (a LayerNorm's) and
//     every thread builds the operand from them; then that warp walks k in steps of 16, one mma a
//     step with the rows as A and the operand as every column of B, a stage's 16 steps unrolled
//     with their operands loaded two steps ahead; the other three warps copy the rows into shared
//     memory, a stage a slice of kRowDmmaDepth k.
//   * it is launched as a programmatic dependent of the kernel before it (dependent_launch.hpp):
//     its blocks may start while that kernel finishes, every thread loading the prologue's own
//     weights (a LayerNorm's) into registers and the storing lanes sending theirs (a bias) toward
//     the L2; then they wait for the earlier kernel's results before reading the row or writing
//     anything. Each block lets the next such kernel start once its own row (and its first slice,
//     where that was copied before the wait) has landed: earlier, the next kernel's copies took the
//     memory from them (bench/RESULTS.md, forty-third run).
//   * when the copies start (kLateCopies): a block's copies in flight as the kernel before it ends
//     hold back that kernel's release of its dependents, by up to 3.5 µs for a whole weight's worth
//     (bench/cuda/NOTES.md, fiftieth run). So a plain product stages its stages before the wait
//     (its chain starts with the row), a LayerNorm's product none: its copies start once the row
//     is in, behind the LayerNorm's chains.
//   * one warp computes and three copy; the computing warp is the one on the multiprocessor's
//     quarter numbered by the block's place on it, so two blocks on one multiprocessor run their
//     chains on two quarters' tensor cores, not one.
// Terms past the end are (-0.0) · (+0.0) or (+0.0) · (-0.0) = -0.0, which leaves every accumulator
// as it was (x + -0.0 == x for every x, -0.0 and NaN included), so no length needs to be a multiple
// of 16.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/kernels/row_dmma.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/kernels/async_copy.hpp"
#include "osprey/gpu/cuda/kernels/block_trace.hpp"
#include "osprey/gpu/cuda/kernels/dependent_launch.hpp"
#include "osprey/gpu/cuda/kernels/warp_place.hpp"

namespace osprey::cuda_detail {
namespace {  // internal linkage: osprey/gpu/cuda/launch_faults.hpp says why

// d += A (16 x 16) · B (16 x 8), each output a chain over k ascending. Fragments (PTX ISA, mma
// m16n8k16 .f64), with g = lane / 4 and t = lane % 4: a[i] is A (g + 8 (i % 2), t + 4 (i / 2)),
// b[i] is B (t + 4 i, g), d[i] is D (g + 8 (i / 2), 2 t + i % 2).
__device__ __forceinline__ void dmma16816(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
      "{%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]),
        "d"(b[2]), "d"(b[3]));
#else
  __trap();  // never launched: dmmaCompiled is false for code compiled for these architectures
#endif
}

constexpr int kDmmaK = 16;     // terms of each output a step
constexpr int kDmmaAhead = 2;  // steps whose operands are in registers, loaded before their step

// `steps` dependent mma steps on d, step i's operands from load(i, a, b). The operands load into
// the registers their step has just read (no operand waits for a load issued right before its
// step; with the loads inside lane conditions, a step took 390 cycles instead of 97:
// tools/profile/row_dmma_probe.cu), so load must read without conditions on the lane.
template <class Load>
__device__ __forceinline__ void dmmaSteps(double (&d)[4], int steps, Load load) {
  double a[kDmmaAhead][8], b[kDmmaAhead][4];
#pragma unroll
  for (int r = 0; r < kDmmaAhead; ++r)
    if (r < steps) load(r, a[r], b[r]);
  for (int s0 = 0; s0 < steps; s0 += kDmmaAhead) {
#pragma unroll
    for (int r = 0; r < kDmmaAhead; ++r) {
      if (s0 + r < steps) {
        dmma16816(d, a[r], b[r]);
        if (s0 + r + kDmmaAhead < steps) load(s0 + r + kDmmaAhead, a[r], b[r]);
      }
    }
  }
}

// Steps dependent mma steps on d, unrolled, step i's operands from load(i, a, b) two steps ahead in a
// ring of three registers sets, so no step waits for a load issued right before it: the same mma
// operations, with the same operands in the same order, as dmmaSteps, in fewer cycles a step.
template <int Steps, class Load>
__device__ __forceinline__ void dmmaUnrolled(double (&d)[4], Load load) {
  double a[3][8], b[3][4];
  load(0, a[0], b[0]);
  if constexpr (Steps > 1) load(1, a[1], b[1]);
#pragma unroll
  for (int step = 0; step < Steps; ++step) {
    if (step + 2 < Steps) load(step + 2, a[(step + 2) % 3], b[(step + 2) % 3]);
    dmma16816(d, a[step % 3], b[step % 3]);
  }
}
constexpr int kDmmaRun = 16;  // steps a run of dmmaUnrolled

// Steps dependent mma steps on d, Group at a time, for A's operands read from the L2 or memory,
// whose round trip two steps ahead (dmmaSteps) would not hide: group g + 1's A operands
// (loadA(step, a)) are loaded before group g's steps run, B's (loadB(step, b), near: shared memory)
// as the group starts. loadA is called for steps past the last too (with nothing to load there).
// dmmaGroupsFrom starts from the first group's A operands already loaded (`cur`, loaded by the
// caller earlier, so their round trip is behind it); dmmaGroups loads them itself.
template <int Group, class LoadA, class LoadB>
__device__ __forceinline__ void dmmaGroupsFrom(double (&d)[4], int steps, double (&cur)[Group][8], LoadA loadA,
                                               LoadB loadB) {
  auto loadGroup = [&](double (&a)[Group][8], int s0) {
#pragma unroll
    for (int s = 0; s < Group; ++s) loadA(s0 + s, a[s]);
  };
  for (int s0 = 0; s0 < steps; s0 += Group) {
    double next[Group][8];
    loadGroup(next, s0 + Group);  // in flight while this group's steps run
    double b[Group][4];
#pragma unroll
    for (int s = 0; s < Group; ++s) loadB(s0 + s, b[s]);
#pragma unroll
    for (int s = 0; s < Group; ++s)
      if (s0 + s < steps) dmma16816(d, cur[s], b[s]);
#pragma unroll
    for (int s = 0; s < Group; ++s)
#pragma unroll
      for (int i = 0; i < 8; ++i) cur[s][i] = next[s][i];
  }
}
template <int Group, class LoadA, class LoadB>
__device__ __forceinline__ void dmmaGroups(double (&d)[4], int steps, LoadA loadA, LoadB loadB) {
  double cur[Group][8];
#pragma unroll
  for (int s = 0; s < Group; ++s) loadA(s, cur[s]);
  dmmaGroupsFrom<Group>(d, steps, cur, loadA, loadB);
}

// One chain on the calling warp (every lane calls it, every lane gets the result):
// acc = fma(u[k], v[k], acc) for k = 0 .. n - 1 from acc0, where V says what the terms are: u[k]
// and the ones (the chain acc + u[k]: fma(u, 1, acc) rounds u + acc once, as the addition does),
// the deviation d = u[k] - center twice (the chain of squares, each d made as it is loaded, so no
// pass writes the deviations first), or u[k] and v[k].
enum class ChainOf { Ones, Squares, Products };
template <ChainOf V>
__device__ __forceinline__ double warpChain(const double* u, const double* v, int n, double acc0,
                                            double center = 0.0) {
  const int t = static_cast<int>(threadIdx.x % 32) % 4;
  double d[4] = {acc0, acc0, acc0, acc0};
  const int full = n / kDmmaK;
  // Every row of A and every column of B hold the same values: every output is the chain.
  auto loadAt = [&](int k0) {
    return [=](int step, double (&a)[8], double (&b)[4]) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = k0 + step * kDmmaK + t + 4 * j;
        a[2 * j] = a[2 * j + 1] = V == ChainOf::Squares ? u[k] - center : u[k];
        b[j] = V == ChainOf::Ones ? 1.0 : V == ChainOf::Squares ? a[2 * j] : v[k];
      }
    };
  };
  int done = 0;
  for (; done + kDmmaRun <= full; done += kDmmaRun) dmmaUnrolled<kDmmaRun>(d, loadAt(done * kDmmaK));
  dmmaSteps(d, full - done, loadAt(done * kDmmaK));
  if (full * kDmmaK < n) {  // the last, partial step
    double at[8], bt[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k = full * kDmmaK + t + 4 * j;
      at[2 * j] = at[2 * j + 1] = k < n ? (V == ChainOf::Squares ? u[k] - center : u[k]) : -0.0;
      bt[j] = k < n ? (V == ChainOf::Ones ? 1.0 : V == ChainOf::Squares ? at[2 * j] : v[k]) : 0.0;
    }
    dmma16816(d, at, bt);
  }
  return __shfl_sync(0xffffffffu, d[0], 0);
}
__device__ __forceinline__ double warpSum(const double* u, int n, double acc0) {
  return warpChain<ChainOf::Ones>(u, nullptr, n, acc0);
}
// The chain fma(d, d, acc) of the deviations d = u[k] - center.
__device__ __forceinline__ double warpSquaresAbout(const double* u, double center, int n, double acc0) {
  return warpChain<ChainOf::Squares>(u, nullptr, n, acc0, center);
}
__device__ __forceinline__ double warpDot(const double* u, const double* v, int n, double acc0) {
  return warpChain<ChainOf::Products>(u, v, n, acc0);
}

constexpr int kRowDmmaThreads = 128;  // one warp computes, three copy
constexpr int kRowDmmaCopiers = kRowDmmaThreads - 32;
constexpr int kRowDmmaDepth = 256;    // k a stage
// A stage's rows sit 260 doubles apart: 8 banks apart, so a step's fragment loads (8 rows x 4
// neighbouring k) take the two wavefronts of 256 bytes and no more.
constexpr int kRowDmmaLd = kRowDmmaDepth + 4;
constexpr long long kRowDmmaMostIC = 4096;  // the longest row the kernel takes (the operand's room)

// Rows of wT a block (16: A's rows; fewer: A's row r holds the block's row r % Rows, and the
// outputs of A's rows from Rows on are not stored, so a weight of few rows still spreads over every
// multiprocessor) and stages of kRowDmmaDepth k in flight.
template <int Rows, int Stages>
struct RowDmmaShape {
  static_assert(Rows >= 1 && Rows <= 16, "a block's rows are some of A's 16");
  static constexpr int kRows = Rows, kStages = Stages;
  static constexpr std::size_t kStageDoubles = static_cast<std::size_t>(Rows) * kRowDmmaLd;
};

__host__ __device__ inline long long rowDmmaOperandLength(long long IC) { return (IC + kDmmaK - 1) / kDmmaK * kDmmaK; }
template <class Shape>
std::size_t rowDmmaSharedBytes(long long IC) {
  return sizeof(double) * (Shape::kStages * Shape::kStageDoubles + static_cast<std::size_t>(rowDmmaOperandLength(IC)));
}

// Sends the 128-byte lines of p[0 .. n) toward the L2, the block's threads sharing them: for weights
// a kernel reads after its wait for the kernels before it (none of them writes weights).
__device__ __forceinline__ void warmLines(const double* p, int n, int tid, int threads) {
  for (int e = tid * 16; e < n; e += threads * 16) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + e));
}

// in[0 .. n) into row[0 .. n) in shared memory, the block's threads sharing it with every load
// issued before any store (one round trip instead of one a few elements).
__device__ __forceinline__ void loadRow(double* row, const double* in, int n, int tid, int threads) {
  constexpr int kBatch = 8;
  for (int base = tid; base < n; base += kBatch * threads) {
    double v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int c = base + u * threads;
      v[u] = c < n ? in[c] : 0.0;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int c = base + u * threads;
      if (c < n) row[c] = v[u];
    }
  }
}

// A prologue leaves the row's operand in shared memory in phases, each called by the kernel:
//   held = hold(tid, threads, IC)     every thread, before the wait: its share of the prologue's own
//                                     weights (which no kernel writes) into registers;
//   load(row, IC, tid, threads)       every thread, after the wait: the row into shared memory;
//   chains(row, IC, stats)            the computing warp, if kChains: the row's chains into stats[2];
//   build(row, IC, stats, tid, threads, held) every thread, if kChains: the operand from row and stats.
// A store may have warm(o) (every storing lane, before the wait) besides store(o, acc), and
// hold(o) with put(o, acc, held) (holdFor below).

// What a store adds to a chain's result (a bias, the residual), loaded after the wait and before
// the chains run, so that the store at the end waits for no load: a store with hold(o) and
// put(o, acc, held) is called that way, one with only store(o, acc) as it is.
struct NothingHeld {};
template <class Store>
__device__ __forceinline__ auto holdFor(const Store& store, Index o) {
  if constexpr (requires { store.hold(o); }) return store.hold(o); else return NothingHeld{};
}
template <class Store, class Held>
__device__ __forceinline__ void storeHeld(const Store& store, Index o, double acc, const Held& held) {
  if constexpr (requires { store.put(o, acc, held); }) store.put(o, acc, held); else store(o, acc);
}

// After every thread's load and a barrier: a prologue with chains runs them on chainWarp and every
// thread builds the operand from them (a barrier after each), so the row is ready for all.
template <class Prologue, class Held>
__device__ __forceinline__ void buildOperand(const Prologue& prologue, double* row, int IC, double* stats, int tid,
                                             int threads, bool chainWarp, const Held& held) {
  if constexpr (Prologue::kChains) {
    if (chainWarp) prologue.chains(row, IC, stats);
    __syncthreads();
    prologue.build(row, IC, stats, tid, threads, held);
    __syncthreads();
  }
}

// Named barriers between the computing warp and the copiers (0 is __syncthreads'): a stage is full
// (two ids, by the slice's parity) and a stage is empty (two more). Every thread of the block takes part.
// The ids are immediates (a register id would reserve all sixteen).
constexpr int kRowFull = 1, kRowEmpty = 3;
template <int Id>
__device__ __forceinline__ void arriveAt() {
  asm volatile("bar.arrive %0, %1;" ::"n"(Id), "n"(kRowDmmaThreads) : "memory");
}
template <int Id>
__device__ __forceinline__ void syncAt() {
  asm volatile("bar.sync %0, %1;" ::"n"(Id), "n"(kRowDmmaThreads) : "memory");
}
// Barrier Base + parity % 2.
template <int Base>
__device__ __forceinline__ void arriveAt(int parity) {
  if (parity % 2 == 0) arriveAt<Base>(); else arriveAt<Base + 1>();
}
template <int Base>
__device__ __forceinline__ void syncAt(int parity) {
  if (parity % 2 == 0) syncAt<Base>(); else syncAt<Base + 1>();
}

// Block b: outputs Rows b .. Rows b + Rows - 1 of wT (OC x IC) times the row the prologue leaves in
// shared memory, each given to store(o, acc).
template <class Shape, bool Wide, class Prologue, class Store>
__global__ void __launch_bounds__(kRowDmmaThreads, 1)
    rowDmmaKernel(Prologue prologue, Store store, const double* __restrict__ wT, Index OC, int IC) {
  constexpr int Rows = Shape::kRows, Stages = Shape::kStages;
  extern __shared__ __align__(16) double rowDmmaShared[];
  __shared__ double rowStats[2];
  double* stages = rowDmmaShared;                                 // [stage][r][k]
  double* operand = rowDmmaShared + Stages * Shape::kStageDoubles;  // the row, IC
  const int tid = static_cast<int>(threadIdx.x);
  const Index row0 = static_cast<Index>(blockIdx.x) * Rows;
  const int slices = (IC + kRowDmmaDepth - 1) / kRowDmmaDepth;
  BlockTrace trace;

  // The computing warp: the one on the multiprocessor's quarter (its warp slot modulo 4, where the
  // tensor core it issues to sits) numbered by the block's place among the multiprocessor's blocks
  // (its lowest slot / 4), so that two blocks sharing a multiprocessor run their chains on two
  // tensor cores: one m16n8k16 f64 chain keeps a quarter's tensor core busy most of its cycles,
  // and two on one quarter took half again as long a step. Any warp gives the same bits.
  __shared__ int slotOf[kRowDmmaThreads / 32];
  const int warp = tid / 32;
  if (tid % 32 == 0) slotOf[warp] = static_cast<int>(warpSlot());
  __syncthreads();
  int base = slotOf[0], computing = 0;
  for (int w = 1; w < kRowDmmaThreads / 32; ++w) base = slotOf[w] < base ? slotOf[w] : base;
  for (int w = kRowDmmaThreads / 32 - 1; w >= 0; --w)
    if (slotOf[w] % 4 == (base / 4) % 4) computing = w;
  const bool computes = warp == computing;
  const int ctid = warp < computing ? tid : tid - 32;  // 0 .. kRowDmmaCopiers - 1 on the copiers
  trace.open(computes && tid % 32 == 0);

  // Copiers: slice s of the block's rows into stage s % Stages, one commit group a slice
  // (empty past the end, so the waits count groups); past the rows or the depth, zeros.
  auto copySlice = [&](int s) {
    if (s < slices) {
      double* stage = stages + (s % Stages) * Shape::kStageDoubles;
      const int k0 = s * kRowDmmaDepth;
      // Wide: 16 bytes a copy (IC even and wT 16-byte aligned: the launcher checked), else 8.
      constexpr int kPer = Wide ? 2 : 1;
      for (int e = kPer * ctid; e < Rows * kRowDmmaDepth; e += kPer * kRowDmmaCopiers) {
        const int r = e / kRowDmmaDepth, k = e % kRowDmmaDepth;
        const Index row = row0 + r;
        const bool valid = row < OC && k0 + k < IC;
        copyAsync<8 * kPer>(stage + r * kRowDmmaLd + k, valid ? wT + row * IC + k0 + k : wT, valid);
      }
    }
    commitCopies();
  };

  const int lane = tid % 32, g = lane / 4, t = lane % 4;
  // Every column of D holds the same outputs (B's columns are all the operand), so each of the
  // block's rows r < Rows has a lane of its own: row g (d[0]) on the lane with t == 0, row g + 8
  // (d[2]) on the one with t == 1. One path for both, so that a store's own work (GELU's) runs for
  // the two rows at once, not once for each.
  const Index mine = row0 + g + (t == 1 ? 8 : 0);
  const bool stores = computes && t < 2 && g + (t == 1 ? 8 : 0) < Rows && mine < OC;
  double d[4] = {0.0, 0.0, 0.0, 0.0};
  // Where the stages are copied (the header says why): a plain product's before its wait, a
  // LayerNorm's product's once its row is in.
  constexpr bool kLateCopies = Prologue::kChains;
  if (!computes && !kLateCopies)
    for (int s = 0; s < Stages; ++s) copySlice(s);
  const auto prologueHeld = prologue.hold(tid, kRowDmmaThreads, IC);
  if constexpr (requires { store.warm(row0); }) {
    if (stores) store.warm(mine);
  }
  awaitEarlierKernels();  // the row, and whatever store reads, come from the kernels before
  trace.mark<1>();
  decltype(holdFor(store, row0)) held{};
  if (stores) held = holdFor(store, mine);
  prologue.load(operand, IC, tid, kRowDmmaThreads);
  for (int k = IC + tid; k < rowDmmaOperandLength(IC); k += kRowDmmaThreads)
    operand[k] = -0.0;  // against A's +0.0 there
  if (!computes && !kLateCopies) waitCopies<Stages - 1>();  // this copier's part of slice 0 has landed
  __syncthreads();  // the row is in shared memory (and slice 0, where every stage was copied early)
  // Only now may the next kernel start: its copies, started earlier, took the memory from this
  // block's first slice and row.
  startDependents();
  if constexpr (kLateCopies) {
    if (!computes)
      for (int s = 0; s < Stages; ++s) copySlice(s);
  }
  trace.mark<2>();
  buildOperand(prologue, operand, IC, rowStats, tid, kRowDmmaThreads, computes, prologueHeld);
  trace.mark<3>();
  // Slice s: the computing warp waits for its stage to be full (slice 0: the barrier above),
  // computes, and says the stage is empty; the copiers say slice s + 1 has landed before they refill
  // the stage it has just left, so the refill's issue never delays it. Named barriers of both
  // parities: no side can reach a barrier's next use before the other has left its last.
  if (!computes) {
    if constexpr (kLateCopies) {  // slice 0 says it has landed as every later slice does
      waitCopies<Stages - 1>();
      arriveAt<kRowFull>(0);
    }
    for (int s = 0; s + 1 < slices; ++s) {
      waitCopies<Stages - 2>();  // groups 0 .. s + 1 have landed: slice s + 1
      arriveAt<kRowFull>(s + 1);
      syncAt<kRowEmpty>(s);
      copySlice(s + Stages);
    }
  } else {
    for (int s = 0; s < slices; ++s) {
      if (s > 0 || kLateCopies) syncAt<kRowFull>(s);
      const double* stage = stages + (s % Stages) * Shape::kStageDoubles;
      const int k0 = s * kRowDmmaDepth;
      const int depth = IC - k0 < kRowDmmaDepth ? IC - k0 : kRowDmmaDepth;
      // A step's operands: A's rows g and g + 8 at k0 + t + 4j; B's columns all the operand at
      // k0 + t + 4i (so every column of D is the same outputs). Past IC: A's zeros against the
      // operand's -0.0. Where Rows divides 8, rows g and g + 8 are the same row.
      constexpr bool kSameRows = 8 % Rows == 0;
      const double* aRow0 = stage + (g % Rows) * kRowDmmaLd + t;
      const double* aRow1 = stage + ((g + 8) % Rows) * kRowDmmaLd + t;
      const double* bRow = operand + k0 + t;
      if (depth == kRowDmmaDepth) {
        dmmaUnrolled<kRowDmmaDepth / kDmmaK>(d, [&](int step, double (&a)[8], double (&b)[4]) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int k = step * kDmmaK + 4 * j;
            a[2 * j] = aRow0[k];
            a[2 * j + 1] = kSameRows ? a[2 * j] : aRow1[k];
            b[j] = bRow[k];
          }
        });
      } else {
        dmmaSteps(d, (depth + kDmmaK - 1) / kDmmaK, [&](int step, double (&a)[8], double (&b)[4]) {
          const int kk = step * kDmmaK;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            a[2 * j] = aRow0[kk + 4 * j];
            a[2 * j + 1] = aRow1[kk + 4 * j];
            b[j] = bRow[kk + 4 * j];
          }
        });
      }
      if (s + 1 < slices) arriveAt<kRowEmpty>(s);
    }
  }
  trace.mark<4>();
  if (stores) storeHeld(store, mine, t == 1 ? d[2] : d[0], held);
  trace.mark<5>();
  trace.close(kTraceRow, wT);
}

// Marks what this translation unit's device code was compiled for (its PTX architecture).
__global__ void rowDmmaCompiledFor() {}

// Whether this translation unit's device code has the FP64 mma shapes: compiled for 9.0 or later
// (code compiled for an earlier architecture, even running on a Hopper, would reach the trap).
inline bool dmmaCompiled() {
  cudaFuncAttributes compiled{};
  return cudaFuncGetAttributes(&compiled, rowDmmaCompiledFor) == cudaSuccess && compiled.ptxVersion >= 90;
}

// Whether the kernel takes a row of IC on the calling thread's device: the row fits its shared
// memory, and the device code has the mma shapes.
inline bool rowDmmaTakes(long long IC) { return IC > 0 && IC <= kRowDmmaMostIC && dmmaCompiled(); }

// The kernel's plain prologue: the row as it is.
struct CopyRow {
  const double* in;
  static constexpr bool kChains = false;
  __device__ NothingHeld hold(int, int, int) const { return {}; }
  __device__ void load(double* row, int IC, int tid, int threads) const { loadRow(row, in, IC, tid, threads); }
};

template <class Shape, bool Wide, class Prologue, class Store>
cudaError_t launchRowDmmaShape(Prologue prologue, Store store, const double* wT, Index OC, int IC,
                               cudaStream_t stream) {
  static SharedMemoryOptIn once;
  if (const cudaError_t status =
          once.ensure(rowDmmaKernel<Shape, Wide, Prologue, Store>, rowDmmaSharedBytes<Shape>(kRowDmmaMostIC));
      status != cudaSuccess)
    return status;
  return launchOverlapped(dim3(static_cast<unsigned>((OC + Shape::kRows - 1) / Shape::kRows)), dim3(kRowDmmaThreads),
                          rowDmmaSharedBytes<Shape>(IC), stream, rowDmmaKernel<Shape, Wide, Prologue, Store>, prologue,
                          store, wT, OC, IC);
}

// 16-byte copies where IC is even and wT 16-byte aligned, else 8-byte ones.
template <class Shape, class Prologue, class Store>
cudaError_t launchRowDmmaCopies(Prologue prologue, Store store, const double* wT, Index OC, int IC,
                                cudaStream_t stream) {
  if (IC % 2 == 0 && reinterpret_cast<std::uintptr_t>(wT) % 16 == 0)
    return launchRowDmmaShape<Shape, true>(prologue, store, wT, OC, IC, stream);
  return launchRowDmmaShape<Shape, false>(prologue, store, wT, OC, IC, stream);
}

// A block's rows: the fewest of the shapes compiled that make at most `each` blocks a
// multiprocessor, so that the multiprocessors hold nearly equal blocks, none copying twice another's
// rows (16 where none does).
constexpr int kRowShapes[] = {3, 4, 6, 9, 12, 16};
inline int rowsPerBlock(Index OC, int multiprocessors, int each) {
  for (const int rows : kRowShapes)
    if ((OC + rows - 1) / rows <= Index{each} * multiprocessors) return rows;
  return 16;
}

// Three stages a block: a product up to 3 kRowDmmaDepth deep whole in flight, a deeper one's
// copies three slices ahead of its chain (more slices in flight delay the first one, which the
// chain waits for: bench/cuda/NOTES.md, forty-fifth run).
constexpr int kRowDmmaStages = 3;

template <class Prologue, class Store>
cudaError_t launchRowDmmaRows(int rows, Prologue prologue, Store store, const double* wT, Index OC, int IC,
                              cudaStream_t stream) {
  auto launch = [&]<int Rows>() {
    return launchRowDmmaCopies<RowDmmaShape<Rows, kRowDmmaStages>>(prologue, store, wT, OC, IC, stream);
  };
  switch (rows) {
    case 3: return launch.template operator()<3>();
    case 4: return launch.template operator()<4>();
    case 6: return launch.template operator()<6>();
    case 9: return launch.template operator()<9>();
    case 12: return launch.template operator()<12>();
    default: return launch.template operator()<16>();
  }
}

// store(o, acc) for every output o of wT (OC x IC) times the row prologue leaves; the caller has
// checked rowDmmaTakes(IC). A product up to 3 kRowDmmaDepth deep takes two blocks a multiprocessor
// (two chains on two quarters' tensor cores, each copying its share of the weights); a deeper one,
// whose chain is the longer part, one (its chain alone on its multiprocessor). multiprocessors: the
// device's (CudaDevice::multiprocessors()).
template <class Prologue, class Store>
cudaError_t launchRowDmma(Prologue prologue, Store store, const double* wT, Index OC, int IC, int multiprocessors,
                          cudaStream_t stream) {
  const int each = IC <= 3 * kRowDmmaDepth ? 2 : 1;
  return launchRowDmmaRows(rowsPerBlock(OC, multiprocessors, each), prologue, store, wT, OC, IC, stream);
}

}  // namespace
}  // namespace osprey::cuda_detail
