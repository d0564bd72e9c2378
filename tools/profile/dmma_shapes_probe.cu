// Which FP64 tensor-core shapes compute the exact contract's chain, and how fast one dependent
// step of each is.
//
// The contract (DESIGN.md §4) makes every output of a product acc = fma(a[k], b[k], acc) from +0.0,
// k ascending. One-token decoding is a few outputs each made of one long chain, so its time is the
// chain's length times one dependent step: about 8.4 cycles for an fma, 26 cycles for a DMMA
// m8n8k4 (4 terms: 6.5 a term). Hopper adds FP64 mma shapes m16n8k4, m16n8k8 and m16n8k16; this
// probe asks, for each shape and for m8n8k4:
//   * whether D = A · B + C, chained over k in the shape's steps, equals the host's ascending fma
//     chain bit for bit, in six regimes (small integers, which any order gives exactly and so check
//     the fragment layout; narrow and wide exponents; cancellation; subnormals; zeros, infinities
//     and overflow), with K = one step, 64 and 256; against two other orders as controls;
//   * how many cycles one dependent instruction takes (one warp, a chain of 4096 of them).
//
//   nvcc -O3 -arch=sm_90a -std=c++20 -Xcompiler -ffp-contract=off -I include -o dmma_shapes tools/profile/dmma_shapes_probe.cu
//   ./dmma_shapes [tiles per regime, default 2048]
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "osprey/gpu/cuda/kernels/row_dmma.hpp"

// ---- the shapes -----------------------------------------------------------------------------------
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k*" with .f64): g = lane / 4, t = lane % 4.
//   m8n8k4:   A a0 (g, t); B b0 (k t, n g); C c0, c1 (g, 2t + j).
//   m16n8kK:  A a_i (row g + 8 (i % 2), k t + 4 (i / 2)); B b_i (k t + 4 i, n g);
//             C c_i (row g + 8 (i / 2), n 2t + i % 2).
template <int M, int K>
struct Shape {
  static constexpr int kM = M, kN = 8, kK = K;
  static constexpr int kA = M * K / 32, kB = K * 8 / 32, kC = M * 8 / 32;
  __host__ __device__ static void aAt(int lane, int i, int& row, int& k) {
    const int g = lane / 4, t = lane % 4;
    if (M == 8) { row = g; k = t; }
    else { row = g + 8 * (i % 2); k = t + 4 * (i / 2); }
  }
  __host__ __device__ static void bAt(int lane, int i, int& k, int& n) { k = lane % 4 + 4 * i; n = lane / 4; }
  __host__ __device__ static void cAt(int lane, int i, int& row, int& n) {
    row = lane / 4 + 8 * (i / 2);
    n = 2 * (lane % 4) + i % 2;
  }
};

template <int M, int K>
__device__ __forceinline__ void mma(double (&d)[Shape<M, K>::kC], const double (&a)[Shape<M, K>::kA],
                                    const double (&b)[Shape<M, K>::kB]);
template <>
__device__ __forceinline__ void mma<8, 4>(double (&d)[2], const double (&a)[1], const double (&b)[1]) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+d"(d[0]), "+d"(d[1]) : "d"(a[0]), "d"(b[0]));
}
template <>
__device__ __forceinline__ void mma<16, 4>(double (&d)[4], const double (&a)[2], const double (&b)[1]) {
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3]) : "d"(a[0]), "d"(a[1]), "d"(b[0]));
}
template <>
__device__ __forceinline__ void mma<16, 8>(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
               : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}
template <>  // the library's own instruction, the one its decoding chains run
__device__ __forceinline__ void mma<16, 16>(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
  osprey::cuda_detail::dmma16816(d, a, b);
}

// One warp a tile: out (M x 8) = A (M x Kt, row-major) · B (Kt x 8, row-major), chained over Kt in
// steps of the shape's K, from +0.0.
template <int M, int K>
__global__ void product(double* out, const double* A, const double* B, int Kt) {
  using S = Shape<M, K>;
  const int lane = static_cast<int>(threadIdx.x);
  const double* a = A + static_cast<size_t>(blockIdx.x) * M * Kt;
  const double* b = B + static_cast<size_t>(blockIdx.x) * Kt * 8;
  double d[S::kC];
  for (double& v : d) v = 0.0;
  for (int k0 = 0; k0 < Kt; k0 += K) {
    double af[S::kA], bf[S::kB];
    for (int i = 0; i < S::kA; ++i) {
      int r, k;
      S::aAt(lane, i, r, k);
      af[i] = a[r * Kt + k0 + k];
    }
    for (int i = 0; i < S::kB; ++i) {
      int k, n;
      S::bAt(lane, i, k, n);
      bf[i] = b[(k0 + k) * 8 + n];
    }
    mma<M, K>(d, af, bf);
  }
  for (int i = 0; i < S::kC; ++i) {
    int r, n;
    S::cAt(lane, i, r, n);
    out[static_cast<size_t>(blockIdx.x) * M * 8 + r * 8 + n] = d[i];
  }
}

// One warp, Steps dependent instructions on one accumulator: cycles per instruction.
template <int M, int K>
__global__ void latency(long long* cycles, double* sink, int steps) {
  using S = Shape<M, K>;
  double d[S::kC], a[S::kA], b[S::kB];
  for (double& v : d) v = 0.0;
  for (int i = 0; i < S::kA; ++i) a[i] = 1.0 + 1e-9 * (threadIdx.x + i);
  for (int i = 0; i < S::kB; ++i) b[i] = 1.0 - 1e-9 * (threadIdx.x + i);
  __syncwarp();
  const long long c0 = clock64();
  for (int s = 0; s < steps; ++s) mma<M, K>(d, a, b);
  const long long c1 = clock64();
  double t = 0.0;
  for (double v : d) t += v;
  sink[threadIdx.x] = t;
  if (threadIdx.x == 0) *cycles = c1 - c0;
}

__global__ void fmaLatency(long long* cycles, double* sink, int steps) {
  double acc = 0.0, a = 1.0 + 1e-9 * threadIdx.x, b = 1.0 - 1e-9;
  const long long c0 = clock64();
  for (int s = 0; s < steps; ++s) acc = __fma_rn(a, b, acc);
  const long long c1 = clock64();
  sink[threadIdx.x] = acc;
  if (threadIdx.x == 0) *cycles = c1 - c0;
}

// ---- the host's side ------------------------------------------------------------------------------
double draw(std::mt19937_64& rng, int regime) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-30, 30), small(-8, 8), pick(0, 9);
  switch (regime) {
    case 0: return small(rng);                                  // exact in any order
    case 1: return u(rng);                                      // narrow exponents
    case 2: return std::ldexp(u(rng), e(rng));                  // wide exponents
    case 3: return pick(rng) < 3 ? std::ldexp(u(rng), 40) : u(rng);  // cancellation against large terms
    case 4: return std::ldexp(u(rng), -515 - pick(rng) * 3);   // products and sums in the subnormal range
    default: {                                                  // zeros, infinities, overflow
      const int p = pick(rng);
      if (p == 0) return 0.0;
      if (p == 1) return -0.0;
      if (p == 2) return INFINITY;
      if (p == 3) return std::ldexp(u(rng), 1000);
      return u(rng);
    }
  }
}
const char* kRegimes[] = {"small integers", "narrow exponents", "wide exponents", "cancellation", "subnormals",
                          "zeros/inf/overflow"};

bool same(double x, double y) {
  if (std::isnan(x) && std::isnan(y)) return true;
  uint64_t a, b;
  std::memcpy(&a, &x, 8);
  std::memcpy(&b, &y, 8);
  return a == b;
}

// The host's candidate orders for output (r, n): 0 the ascending chain; 1 the chain in the order a
// k-major register layout would give (k = 4t + i read as t + 4i); 2 each step's K terms summed
// exactly-rounded pairwise, then added (a tree within the step).
double hostOrder(int order, const double* a, const double* b, int Kt, int K, int r, int n) {
  double acc = 0.0;
  for (int k0 = 0; k0 < Kt; k0 += K) {
    if (order == 2) {
      double part = 0.0;
      for (int k = 0; k < K; k += 2)
        part = part + std::fma(a[r * Kt + k0 + k], b[(k0 + k) * 8 + n], a[r * Kt + k0 + k + 1] * b[(k0 + k + 1) * 8 + n]);
      acc = acc + part;
      continue;
    }
    for (int s = 0; s < K; ++s) {
      const int k = order == 0 || K == 4 ? s : (s % (K / 4)) * 4 + s / (K / 4);
      acc = std::fma(a[r * Kt + k0 + k], b[(k0 + k) * 8 + n], acc);
    }
  }
  return acc;
}

template <int M, int K>
bool probe(const char* name, int tiles) {
  std::printf("== %s\n", name);
  bool chain = true;
  long long compared = 0;
  for (int regime = 0; regime < 6; ++regime) {
    for (int Kt : {K, 64, 256}) {
      std::mt19937_64 rng(1234 + regime * 7 + Kt);
      std::vector<double> A(static_cast<size_t>(tiles) * M * Kt), B(static_cast<size_t>(tiles) * Kt * 8),
          D(static_cast<size_t>(tiles) * M * 8);
      for (double& v : A) v = draw(rng, regime);
      for (double& v : B) v = draw(rng, regime);
      double *dA, *dB, *dD;
      cudaMalloc(&dA, A.size() * 8);
      cudaMalloc(&dB, B.size() * 8);
      cudaMalloc(&dD, D.size() * 8);
      cudaMemcpy(dA, A.data(), A.size() * 8, cudaMemcpyHostToDevice);
      cudaMemcpy(dB, B.data(), B.size() * 8, cudaMemcpyHostToDevice);
      product<M, K><<<tiles, 32>>>(dD, dA, dB, Kt);
      const cudaError_t err = cudaMemcpy(D.data(), dD, D.size() * 8, cudaMemcpyDeviceToHost);
      cudaFree(dA);
      cudaFree(dB);
      cudaFree(dD);
      if (err != cudaSuccess) {
        std::printf("  %s failed: %s\n", name, cudaGetErrorString(err));
        return false;
      }
      long long miss[3] = {0, 0, 0};
      for (int t = 0; t < tiles; ++t)
        for (int r = 0; r < M; ++r)
          for (int n = 0; n < 8; ++n) {
            const double got = D[static_cast<size_t>(t) * M * 8 + r * 8 + n];
            const double* a = A.data() + static_cast<size_t>(t) * M * Kt;
            const double* b = B.data() + static_cast<size_t>(t) * Kt * 8;
            for (int o = 0; o < 3; ++o) miss[o] += !same(got, hostOrder(o, a, b, Kt, K, r, n));
          }
      const long long n = static_cast<long long>(tiles) * M * 8;
      compared += n;
      chain = chain && miss[0] == 0;
      std::printf("  %-20s K %3d: %9lld elements, mismatches: ascending chain %lld, k-major chain %lld, "
                  "pairwise step %lld\n",
                  kRegimes[regime], Kt, n, miss[0], miss[1], miss[2]);
    }
  }
  long long* dc;
  double* sink;
  cudaMalloc(&dc, 8);
  cudaMalloc(&sink, 32 * 8);
  const int steps = 4096;
  latency<M, K><<<1, 32>>>(dc, sink, steps);
  latency<M, K><<<1, 32>>>(dc, sink, steps);
  long long cycles = 0;
  cudaMemcpy(&cycles, dc, 8, cudaMemcpyDeviceToHost);
  cudaFree(dc);
  cudaFree(sink);
  const double per = static_cast<double>(cycles) / steps;
  std::printf("  one dependent instruction: %.2f cycles, %.2f a term of each output\n", per, per / K);
  std::printf("RESULT|%s == ascending fma chain (%lld elements)|%s|%.2f cycles a term\n", name, compared,
              chain ? "PASS" : "FAIL", per / K);
  return chain;
}

int main(int argc, char** argv) {
  const int tiles = argc > 1 ? std::atoi(argv[1]) : 2048;
  long long* dc;
  double* sink;
  cudaMalloc(&dc, 8);
  cudaMalloc(&sink, 32 * 8);
  fmaLatency<<<1, 32>>>(dc, sink, 1 << 16);
  fmaLatency<<<1, 32>>>(dc, sink, 1 << 16);
  long long cycles = 0;
  cudaMemcpy(&cycles, dc, 8, cudaMemcpyDeviceToHost);
  std::printf("dependent fma: %.2f cycles\n", static_cast<double>(cycles) / (1 << 16));
  probe<8, 4>("mma m8n8k4 f64", tiles);
  probe<16, 4>("mma m16n8k4 f64", tiles);
  probe<16, 8>("mma m16n8k8 f64", tiles);
  probe<16, 16>("mma m16n8k16 f64", tiles);
  return 0;
}
