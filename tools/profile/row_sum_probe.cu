// How long one GPU thread takes to sum a 768-wide row held in global memory (what LayerNorm's row
// statistics cost when decoding one token, before they became row folds), written four ways with
// the same additions in the same order. Measured inside the kernel with %globaltimer, so launch overhead is not counted.
//
//   nvcc -std=c++20 -O3 -arch=sm_90 -fmad=false --extended-lambda -Iinclude -I. -DFMT_USE_CONSTEXPR=1 \
//        -o row_sum_probe tools/profile/row_sum_probe.cu && ./row_sum_probe
#include <cstdio>
#include <cuda_runtime.h>

#include "gpt2/layers/ordered_sum.hpp"
#include "probe_clock.hpp"

namespace {

constexpr int kC = 768;

__global__ void fill(double* x, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = 1.0 / (i + 1);
}

template <int Kind>
__global__ void rowSumKernel(const double* x, double* out, unsigned long long* ns) {
  const unsigned long long t0 = globalNs();
  double acc = 0.0;
  const osprey::View v{x, kC};
  if constexpr (Kind == 0) {  // the plain loop
    for (int i = 0; i < kC; ++i) acc = __dadd_rn(acc, x[i]);
  } else if constexpr (Kind == 1) {  // orderedSum, 8 terms ahead, checked indices
    acc = gpt2::orderedSum(kC, [&](osprey::Int c) { return v[c]; });
  } else if constexpr (Kind == 2) {  // orderedSum, 64 ahead, through a raw pointer
    acc = gpt2::orderedSum<64>(kC, [&](osprey::Int c) { return x[c.raw()]; });
  } else {  // 64 ahead, plain indices
    int c = 0;
    for (; c + 64 <= kC; c += 64) {
      double t[64];
#pragma unroll
      for (int j = 0; j < 64; ++j) t[j] = x[c + j];
#pragma unroll
      for (int j = 0; j < 64; ++j) acc = __dadd_rn(acc, t[j]);
    }
  }
  *out = acc;
  *ns = globalNs() - t0;
}

template <int Kind>
void run(const char* name, double* x, double* out, unsigned long long* ns) {
  unsigned long long best = ~0ull;
  for (int rep = 0; rep < 5; ++rep) {
    fill<<<(kC + 255) / 256, 256>>>(x, kC);  // the row was just written, as by the residual add
    rowSumKernel<Kind><<<1, 1>>>(x, out, ns);
    unsigned long long t = 0;
    cudaMemcpy(&t, ns, sizeof t, cudaMemcpyDeviceToHost);
    if (t < best) best = t;
  }
  double sum = 0;
  cudaMemcpy(&sum, out, sizeof sum, cudaMemcpyDeviceToHost);
  std::printf("%-40s %8.2f us   (sum %.17g)\n", name, best / 1000.0, sum);
  std::printf("RESULT|row sum 768, one thread: %s|us|%.2f\n", name, best / 1000.0);
}

}  // namespace

int main() {
  double *x = nullptr, *out = nullptr;
  unsigned long long* ns = nullptr;
  if (cudaMalloc(&x, kC * sizeof(double)) != cudaSuccess || cudaMalloc(&out, sizeof(double)) != cudaSuccess ||
      cudaMalloc(&ns, sizeof(unsigned long long)) != cudaSuccess) {
    std::printf("no GPU\n");
    return 1;
  }
  run<0>("plain loop", x, out, ns);
  run<1>("orderedSum, 8 ahead, checked Int", x, out, ns);
  run<2>("orderedSum, 64 ahead, raw pointer", x, out, ns);
  run<3>("64 ahead, plain int", x, out, ns);
  return 0;
}
