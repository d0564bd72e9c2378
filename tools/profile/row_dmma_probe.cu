// Where the tensor-core decoding chains (osprey/gpu/cuda/kernels/row_dmma.hpp) spend their time:
// one warp's chain of 768 terms from shared memory as mma steps (warpChain) and as fma steps, and
// the one-row product kernel alone on GPT-2's shapes and several block shapes, each timed with the
// clock or with events, each shape's outputs compared bit for bit with the chosen shape's.
//
//   nvcc -O3 -arch=sm_90a -std=c++20 -fmad=false -I include -o row_dmma_probe tools/profile/row_dmma_probe.cu
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "osprey/gpu/cuda/kernels/row_dmma.hpp"

using namespace osprey::cuda_detail;

__global__ void chainTimes(long long* cycles, double* sink, const double* u, int n) {
  __shared__ double su[4096], sv[4096];
  for (int i = threadIdx.x; i < n; i += 32) {
    su[i] = u[i];
    sv[i] = u[n - 1 - i];
  }
  __syncwarp();
  long long c0 = clock64();
  const double a = warpDot(su, sv, n, 0.0);
  long long c1 = clock64();
  double acc = 0.0;
  if (threadIdx.x == 0) {
    for (int k = 0; k < n; ++k) acc = __fma_rn(su[k], sv[k], acc);
  }
  long long c2 = clock64();
  if (threadIdx.x == 0) {
    cycles[0] = c1 - c0;
    cycles[1] = c2 - c1;
    sink[0] = a;
    sink[1] = acc;
  }
}

// A chain of mma steps on one accumulator whose operands differ from step to step: 8 steps, all in
// registers before the clock starts (Ahead == 0), or 64 loaded from shared memory Ahead steps before
// their step, How: twelve 8-byte loads a step; the same bytes as six 16-byte pairs (as a layout with
// each lane's k of a step side by side would allow); or A's eight loads alone, B held in registers.
// Whether a step's cost above the registers-only chain is its loads' count or their bytes.
enum class StepLoads { Twelve, Pairs, AOnly };
template <StepLoads How, int Ahead>
__global__ void stepTimes(long long* cycles, double* sink, const double* u) {
  __shared__ __align__(16) double s[64 * 12 * 32];
  for (int i = threadIdx.x; i < 64 * 12 * 32; i += 32) s[i] = u[i % 4096];
  __syncwarp();
  const int lane = threadIdx.x;
  auto load = [&](int st, double (&a)[8], double (&b)[4]) {
    if constexpr (How == StepLoads::Pairs) {
      const double2* pairs = reinterpret_cast<const double2*>(s);
#pragma unroll
      for (int i = 0; i < 6; ++i) {
        const double2 v = pairs[(st * 6 + i) * 32 + lane];
        double* into = i < 4 ? a + 2 * i : b + 2 * (i - 4);
        into[0] = v.x;
        into[1] = v.y;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) a[i] = s[(st * 12 + i) * 32 + lane];
      if constexpr (How == StepLoads::Twelve)
#pragma unroll
        for (int i = 0; i < 4; ++i) b[i] = s[(st * 12 + 8 + i) * 32 + lane];
    }
  };
  constexpr int kRing = Ahead == 0 ? 8 : Ahead;
  double d[4] = {0, 0, 0, 0};
  double a[kRing][8], b[kRing][4];
#pragma unroll
  for (int st = 0; st < kRing; ++st) {
#pragma unroll
    for (int i = 0; i < 4; ++i) b[st][i] = u[lane + i];  // AOnly's B; the others load over it
    load(st, a[st], b[st]);
  }
  __syncwarp();
  const long long c0 = clock64();
  if constexpr (Ahead == 0) {
#pragma unroll
    for (int st = 0; st < kRing; ++st) dmma16816(d, a[st], b[st]);
  } else {
#pragma unroll
    for (int st = 0; st < 64; ++st) {
      dmma16816(d, a[st % Ahead], b[st % Ahead]);
      load((st + Ahead) % 64, a[st % Ahead], b[st % Ahead]);
    }
  }
  d[0] += d[1] + d[2] + d[3];  // waits for the last step
  const long long c1 = clock64();
  if (lane == 0) {
    cycles[0] = c1 - c0;
    sink[0] = d[0];
  }
}

using CopyIn = CopyRow;
struct Plain {
  double* out;
  __device__ void operator()(osprey::Index o, double acc) const { out[o] = acc; }
};

// shape(name, launch) for RowDmmaShape<Rows, Stages> and each further (rows, stages) pair.
template <int Rows, int Stages, int... More, class Shape>
void eachShape(Shape& shape) {
  char name[48];
  std::snprintf(name, sizeof name, "%d rows a block, %d stages", Rows, Stages);
  shape(name, [](auto... args) { return launchRowDmmaCopies<RowDmmaShape<Rows, Stages>>(args..., 0); });
  if constexpr (sizeof...(More) > 0) eachShape<More...>(shape);
}

int main() {
  int device = 0, multiprocessors = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
  std::vector<double> h(4096 * 4096);
  for (size_t i = 0; i < h.size(); ++i) h[i] = ((i * 2654435761u) % 1000) / 1000.0 - 0.5;
  double *u, *sink, *w, *x, *out;
  long long* cycles;
  cudaMalloc(&u, 4096 * 8);
  cudaMalloc(&sink, 16);
  cudaMalloc(&cycles, 16);
  cudaMalloc(&w, h.size() * 8);
  cudaMalloc(&x, 4096 * 8);
  cudaMalloc(&out, 65536 * 8);
  cudaMemcpy(u, h.data(), 4096 * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(x, h.data(), 4096 * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(w, h.data(), h.size() * 8, cudaMemcpyHostToDevice);
  for (int len : {768, 3072}) {
    chainTimes<<<1, 32>>>(cycles, sink, u, len);
    chainTimes<<<1, 32>>>(cycles, sink, u, len);
    long long c[2];
    cudaMemcpy(c, cycles, 16, cudaMemcpyDeviceToHost);
    double s[2];
    cudaMemcpy(s, sink, 16, cudaMemcpyDeviceToHost);
    std::printf("chain of %d from shared memory: mma %lld cycles (%.2f a term), fma %lld (%.2f a term), %s\n", len,
                c[0], double(c[0]) / len, c[1], double(c[1]) / len, s[0] == s[1] ? "same bits" : "DIFFERENT");
  }
  // Each run twice, the second timed (the first loads the code).
  auto cyclesAStep = [&](auto kernel, int steps) {
    long long c;
    kernel<<<1, 32>>>(cycles, sink, u);
    kernel<<<1, 32>>>(cycles, sink, u);
    cudaMemcpy(&c, cycles, 8, cudaMemcpyDeviceToHost);
    return c / double(steps);
  };
  auto report = [&](const char* what, auto kernel, int steps) {
    std::printf("%s: %.1f cycles a step\n", what, cyclesAStep(kernel, steps));
  };
  using enum StepLoads;
  report("8 mma steps, operands in registers, different each step", stepTimes<Twelve, 0>, 8);
  report("64 mma steps, operands loaded 1 step ahead", stepTimes<Twelve, 1>, 64);
  report("64 mma steps, operands loaded 2 steps ahead", stepTimes<Twelve, 2>, 64);
  report("64 mma steps, operands loaded 4 steps ahead", stepTimes<Twelve, 4>, 64);
  report("64 mma steps, operands loaded as pairs 2 steps ahead", stepTimes<Pairs, 2>, 64);
  report("64 mma steps, operands loaded as pairs 4 steps ahead", stepTimes<Pairs, 4>, 64);
  report("64 mma steps, A loaded 2 steps ahead, B in registers", stepTimes<AOnly, 2>, 64);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::printf("rowDmmaTakes(768): %s\n", rowDmmaTakes(768) ? "yes" : "no");
  struct Shape { int OC, IC; };
  for (Shape sh : {Shape{2304, 768}, Shape{3072, 768}, Shape{768, 768}, Shape{768, 3072}}) {
    std::printf("rowDmma %d x %d:\n", sh.OC, sh.IC);
    // Each shape timed, then its outputs against the chosen shape's (the first timed), bit for bit.
    std::vector<double> chosen, got(sh.OC);
    auto shape = [&](const char* name, auto launchShape) {
      auto launch = [&] { launchShape(CopyIn{x}, Plain{out}, w, sh.OC, sh.IC); };
      cudaMemset(out, 0xff, sh.OC * sizeof(double));  // NaNs, so that an output the shape never stores shows
      for (int rep = 0; rep < 3; ++rep) launch();
      cudaEventRecord(e0);
      const int reps = 50;
      for (int rep = 0; rep < reps; ++rep) launch();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      const cudaError_t status = cudaGetLastError();
      cudaMemcpy(got.data(), out, sh.OC * sizeof(double), cudaMemcpyDeviceToHost);
      if (chosen.empty()) chosen = got;
      const bool same = std::memcmp(got.data(), chosen.data(), sh.OC * sizeof(double)) == 0;
      std::printf("  %-34s %.2f us a launch (%s), %s\n", name, ms * 1000 / reps, cudaGetErrorString(status),
                  same ? "same bits" : "DIFFERENT");
    };
    shape("chosen", [&](auto... args) { return launchRowDmma(args..., multiprocessors, 0); });
    // The shapes used before (16 rows for qkv and fc, 4 rows and 8 stages otherwise), then blocks of
    // 3 to 16 rows at three stages (bench/cuda/NOTES.md, forty-fourth and forty-fifth runs), and
    // stages around three for the blocks near one a multiprocessor.
    eachShape<16, 3, 4, 8, 12, 3, 9, 3, 6, 3, 4, 3, 3, 3, 12, 2, 9, 2, 9, 4, 6, 2, 6, 4>(shape);
  }
  return 0;
}
