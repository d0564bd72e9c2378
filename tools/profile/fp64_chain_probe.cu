// How long one dependent floating-point addition takes on this GPU, in cycles and nanoseconds.
//
// An exact product or row sum is one sequential chain of additions per output (DESIGN.md §4), so
// when there are few outputs (decoding one token: a 768-row weight times one column; LayerNorm of
// one row) a kernel's time is at least (chain length) x (latency of one dependent add). This probe
// measures that latency with one thread running long chains: add only, multiply-then-add (the
// exact matMul's step), fused multiply-add, and single precision for comparison.
//
//   nvcc -O3 -arch=sm_90 -fmad=false -o fp64_chain_probe tools/profile/fp64_chain_probe.cu && ./fp64_chain_probe
#include <cstdio>
#include <cuda_runtime.h>

#include "probe_clock.hpp"

constexpr int kSteps = 1 << 20;

struct Timing {
  long long cycles;
  unsigned long long ns;
  double sink;
};

template <int Kind>
__global__ void chain(Timing* out, double a, double b) {
  double acc = 0.0;
  float accF = 0.0f;
  const float aF = static_cast<float>(a), bF = static_cast<float>(b);
  const unsigned long long t0 = globalNs();
  const long long c0 = clock64();
#pragma unroll 16
  for (int k = 0; k < kSteps; ++k) {
    if constexpr (Kind == 0) acc = __dadd_rn(acc, a);
    if constexpr (Kind == 1) acc = __dadd_rn(acc, __dmul_rn(a, b));
    if constexpr (Kind == 2) acc = __fma_rn(a, b, acc);
    if constexpr (Kind == 3) accF = __fadd_rn(accF, aF * bF);
  }
  const long long c1 = clock64();
  const unsigned long long t1 = globalNs();
  out->cycles = c1 - c0;
  out->ns = t1 - t0;
  out->sink = acc + accF;
}

template <int Kind>
void run(const char* name, Timing* dev) {
  chain<Kind><<<1, 1>>>(dev, 1.0000001, 0.9999999);  // warm-up
  chain<Kind><<<1, 1>>>(dev, 1.0000001, 0.9999999);
  Timing t{};
  if (cudaMemcpy(&t, dev, sizeof t, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("probe failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return;
  }
  std::printf("%-28s %6.2f cycles  %6.2f ns per dependent step  (clock %.2f GHz)\n", name,
              static_cast<double>(t.cycles) / kSteps, static_cast<double>(t.ns) / kSteps,
              static_cast<double>(t.cycles) / static_cast<double>(t.ns));
  std::printf("RESULT|dependent %s|ns per step|%.2f\n", name, static_cast<double>(t.ns) / kSteps);
}

int main() {
  Timing* dev = nullptr;
  if (cudaMalloc(&dev, sizeof(Timing)) != cudaSuccess) {
    std::printf("no GPU\n");
    return 1;
  }
  run<0>("fp64 add", dev);
  run<1>("fp64 multiply, then add", dev);
  run<2>("fp64 fused multiply-add", dev);
  run<3>("fp32 add", dev);
  cudaFree(dev);
  return 0;
}
