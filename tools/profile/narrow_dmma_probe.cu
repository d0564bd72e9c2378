// One-column exact products (decoding: a weight held transposed, R x K, times the token's column)
// on the FP64 tensor cores, against the CUDA-core chain and a device copy of the same bytes.
//
// Each output must be acc = fma(w[r][k], x[k], acc) from +0.0, k ascending (DESIGN.md §4). The
// CUDA-core chain pays one dependent fma latency a term; a DMMA (mma.m8n8k4 f64) adds four terms
// of each of 8 rows in one instruction, in k order (docs/EXACTNESS.md), so a warp holding 8 rows
// pays one DMMA latency per four terms. The weight is read straight into the A fragments: lane l
// holds row l/4 and k = 4s + l%4 of step s, so one load instruction reads 8 whole 32-byte sectors.
// With few rows (768) parallelism is scarce, so each warp keeps `Depth` steps of loads in flight.
//
//   nvcc -std=c++20 -O3 -arch=sm_90a -fmad=false -o narrow_dmma_probe tools/profile/narrow_dmma_probe.cu && ./narrow_dmma_probe
//
// Prints, per shape: microseconds a product for each kernel (median of 50 launches, events around
// each), GB/s of the weight, and whether each kernel's outputs equal the reference chain bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "probe_check.hpp"

// The reference: a thread a row, the plain chain.
__global__ void chainKernel(double* y, const double* w, const double* x, int R, int K) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= R) return;
  double acc = 0.0;
  for (int k = 0; k < K; ++k) acc = __fma_rn(w[static_cast<size_t>(r) * K + k], x[k], acc);
  y[r] = acc;
}

__device__ __forceinline__ void dmma(double& c0, double& c1, double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(c0), "+d"(c1)
               : "d"(a), "d"(b));
}

// A warp a group of 8 rows, loads straight into the fragments, Depth steps ahead.
template <int Depth, int Warps>
__global__ void __launch_bounds__(32 * Warps) dmmaDirect(double* y, const double* w, const double* x, int R, int K) {
  const int lane = threadIdx.x % 32;
  const int group = blockIdx.x * Warps + threadIdx.x / 32;
  const int row0 = group * 8;
  if (row0 >= R) return;
  const int r = row0 + lane / 4, j = lane % 4;
  const bool real = r < R;
  const double* wr = w + static_cast<size_t>(real ? r : row0) * K + j;
  const double* xr = x + j;
  const int steps = K / 4;
  double c0 = 0.0, c1 = 0.0;
  double a[Depth];
#pragma unroll
  for (int i = 0; i < Depth; ++i) a[i] = i < steps ? __ldg(wr + 4 * i) : 0.0;
  for (int s0 = 0; s0 < steps; s0 += Depth) {
#pragma unroll
    for (int i = 0; i < Depth; ++i) {
      const int s = s0 + i;
      if (s < steps) {
        const double b = lane < 4 ? __ldg(xr + 4 * s) : 0.0;
        const double ai = a[i];
        if (s + Depth < steps) a[i] = __ldg(wr + 4 * (s + Depth));
        dmma(c0, c1, real ? ai : 0.0, b);
      }
    }
  }
  if (j == 0 && real) {
    for (int k = steps * 4; k < K; ++k) c0 = __fma_rn(w[static_cast<size_t>(r) * K + k], x[k], c0);
    y[r] = c0;
  }
}

// The same, the weight staged through shared memory by cp.async (each warp its own 8 rows,
// Stages slices of 4·Depth k in flight), so more bytes are in flight than registers could hold.
template <int Depth, int Stages, int Warps>
__global__ void __launch_bounds__(32 * Warps) dmmaStaged(double* y, const double* w, const double* x, int R, int K) {
  extern __shared__ __align__(16) double staged[];
  const int lane = threadIdx.x % 32, warpInBlock = threadIdx.x / 32;
  const int group = blockIdx.x * Warps + warpInBlock;
  const int row0 = group * 8;
  constexpr int kSlice = 4 * Depth;          // k per slice
  constexpr int kLd = kSlice + 4;            // padded row (doubles), keeps 16-byte alignment
  double* mine = staged + static_cast<size_t>(warpInBlock) * Stages * 8 * kLd;
  const int slices = (K + kSlice - 1) / kSlice;
  const int steps = K / 4;
  auto issue = [&](int t) {
    if (t < slices) {
      double* into = mine + (t % Stages) * 8 * kLd;
      const int k0 = t * kSlice;
      // 8 rows x kSlice doubles, 16 bytes a copy: row = e / (kSlice/2), pair = e % (kSlice/2)
      for (int e = lane; e < 8 * kSlice / 2; e += 32) {
        const int rr = e / (kSlice / 2), p = e % (kSlice / 2);
        const int row = row0 + rr, k = k0 + 2 * p;
        const bool ok = row < R && k + 1 < K;
        const double* src = ok ? w + static_cast<size_t>(row) * K + k : w;
        const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(into + rr * kLd + 2 * p));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
      }
    }
    asm volatile("cp.async.commit_group;");
  };
  if (row0 >= R) return;
  for (int t = 0; t < Stages - 1; ++t) issue(t);
  const int r = row0 + lane / 4, j = lane % 4;
  double c0 = 0.0, c1 = 0.0;
  for (int t = 0; t < slices; ++t) {
    issue(t + Stages - 1);
    asm volatile("cp.async.wait_group %0;" ::"n"(Stages - 1));
    __syncwarp();
    const double* tile = mine + (t % Stages) * 8 * kLd + (lane / 4) * kLd + j;
    const int first = t * Depth;
#pragma unroll 8
    for (int i = 0; i < Depth; ++i) {
      if (first + i < steps) {
        const double b = lane < 4 ? __ldg(x + 4 * (first + i) + j) : 0.0;
        dmma(c0, c1, tile[4 * i], b);
      }
    }
    __syncwarp();
  }
  if (j == 0 && r < R) {
    for (int k = steps * 4; k < K; ++k) c0 = __fma_rn(w[static_cast<size_t>(r) * K + k], x[k], c0);
    y[r] = c0;
  }
}

// The latency of one dependent DMMA, one warp.
__global__ void dmmaLatency(long long* cycles, double* sink, double a, double b) {
  double c0 = 0.0, c1 = 0.0;
  const long long t0 = clock64();
#pragma unroll 16
  for (int i = 0; i < 4096; ++i) dmma(c0, c1, a, b);
  const long long t1 = clock64();
  if (threadIdx.x == 0) *cycles = t1 - t0;
  sink[threadIdx.x] = c0 + c1;
}

template <class Launch>
float medianUs(Launch launch) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i) launch();
  std::vector<float> t;
  for (int i = 0; i < 50; ++i) {
    CHECK(cudaEventRecord(e0));
    launch();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.0f);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  {
    long long* cyc;
    double* sink;
    CHECK(cudaMalloc(&cyc, sizeof(long long)));
    CHECK(cudaMalloc(&sink, 32 * sizeof(double)));
    dmmaLatency<<<1, 32>>>(cyc, sink, 1.0000001, 0.5);
    long long c = 0;
    CHECK(cudaMemcpy(&c, cyc, sizeof c, cudaMemcpyDeviceToHost));
    std::printf("dependent DMMA m8n8k4: %.1f cycles each (4 k of each of 64 outputs)\n", c / 4096.0);
  }
  const int shapes[][2] = {{768, 768}, {2304, 768}, {3072, 768}, {768, 3072}, {50257, 768}};
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const auto& shape : shapes) {
    const int R = shape[0], K = shape[1];
    std::vector<double> hw(static_cast<size_t>(R) * K), hx(K);
    for (auto& v : hw) v = normal(gen) * 0.02;
    for (auto& v : hx) v = normal(gen);
    hw[5] = -0.0;
    hx[3] = 1e-310;  // a subnormal and a signed zero among the terms
    double *w, *x, *y, *copy;
    const size_t bytes = hw.size() * sizeof(double);
    CHECK(cudaMalloc(&w, bytes));
    CHECK(cudaMalloc(&copy, bytes));
    CHECK(cudaMalloc(&x, K * sizeof(double)));
    CHECK(cudaMalloc(&y, R * sizeof(double)));
    CHECK(cudaMemcpy(w, hw.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(x, hx.data(), K * sizeof(double), cudaMemcpyHostToDevice));
    std::vector<double> want(R), got(R);
    chainKernel<<<(R + 127) / 128, 128>>>(y, w, x, R, K);
    CHECK(cudaMemcpy(want.data(), y, R * sizeof(double), cudaMemcpyDeviceToHost));
    auto report = [&](const char* name, float us, bool checkBits) {
      bool same = true;
      if (checkBits) {
        CHECK(cudaMemcpy(got.data(), y, R * sizeof(double), cudaMemcpyDeviceToHost));
        same = std::memcmp(got.data(), want.data(), R * sizeof(double)) == 0;
      }
      std::printf("  %-34s %8.2f us  %7.0f GB/s  %s\n", name, us, bytes / (us * 1e3),
                  checkBits ? (same ? "bits == chain" : "BITS DIFFER") : "");
    };
    std::printf("%d x %d x 1 (%.1f MB of weight)\n", R, K, bytes / 1e6);
    report("device copy (read + write)", medianUs([&] { CHECK(cudaMemcpyAsync(copy, w, bytes, cudaMemcpyDeviceToDevice)); }) / 2, false);
    report("chain, a thread a row", medianUs([&] { chainKernel<<<(R + 127) / 128, 128>>>(y, w, x, R, K); }), true);
    const int groups = (R + 7) / 8;
    report("dmma direct, 16 ahead, 4 warps", medianUs([&] { dmmaDirect<16, 4><<<(groups + 3) / 4, 128>>>(y, w, x, R, K); }), true);
    report("dmma direct, 32 ahead, 4 warps", medianUs([&] { dmmaDirect<32, 4><<<(groups + 3) / 4, 128>>>(y, w, x, R, K); }), true);
    report("dmma direct, 64 ahead, 2 warps", medianUs([&] { dmmaDirect<64, 2><<<(groups + 1) / 2, 64>>>(y, w, x, R, K); }), true);
    {
      constexpr int D = 32, S = 4, Wp = 2;
      const size_t smem = sizeof(double) * Wp * S * 8 * (4 * D + 4);
      CHECK(cudaFuncSetAttribute(dmmaStaged<D, S, Wp>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      report("dmma staged, 128 k x 4 stages, 2 w", medianUs([&] { dmmaStaged<D, S, Wp><<<(groups + Wp - 1) / Wp, 32 * Wp, smem>>>(y, w, x, R, K); }), true);
    }
    {
      constexpr int D = 16, S = 8, Wp = 1;
      const size_t smem = sizeof(double) * Wp * S * 8 * (4 * D + 4);
      CHECK(cudaFuncSetAttribute(dmmaStaged<D, S, Wp>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      report("dmma staged, 64 k x 8 stages, 1 w", medianUs([&] { dmmaStaged<D, S, Wp><<<(groups + Wp - 1) / Wp, 32 * Wp, smem>>>(y, w, x, R, K); }), true);
    }
    CHECK(cudaFree(w));
    CHECK(cudaFree(copy));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }
  return 0;
}
