// The exact cuda handler's LayerNorm kernels (gpt2/cuda/layernorm_rows.hpp) at GPT-2 124M's shapes:
// each output first checked bit for bit against the reference layer computed through the same
// handler, then timed alone. The shapes: one row (a decoded token) and 4,096 rows of 768 (a B4
// T1024 training step); the column kernel's dw and db in each shape its template offers, so a run
// shows which one the defaults should be. Two probes give the floor every kernel here sits on:
// the cycles of one dependent fp64 add and fma (a LayerNorm row is two chains of C such steps).
//
//   osprey_layernorm_bench            (after scripts/gpu-check.sh build; prints a table and
//                                      RESULT|name|us|number lines, exit 1 if a bit differs)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt2/cuda/exact_cuda.hpp"

namespace gpt2::bench {
namespace {

using osprey::Index;
using osprey::Scalar;
namespace rows = layernorm_rows;

template <class T>
T ok(osprey::Result<T> r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(r).value();
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

std::vector<Scalar> read(const ExactCuda::Buffer& b) { return ok(osprey::fromGpu(b), "read back"); }

bool same(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Scalar)) == 0;
}

// Microseconds a launch, averaged over `reps` after five untimed ones.
template <class Launch>
float microseconds(Launch launch, int reps = 200) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 5; ++i) launch();
  check(cudaEventRecord(start), "event");
  for (int i = 0; i < reps; ++i) launch();
  check(cudaEventRecord(stop), "event");
  check(cudaEventSynchronize(stop), "the timed launches");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "event");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1000.0f / static_cast<float>(reps);
}

// Cycles a step of a dependent chain of n fp64 adds (Fma: fused multiply-adds), one thread.
template <bool Fma>
__global__ void chainProbe(double* out, const double* x, int n, long long* cycles) {
  const double a = x[0], b = x[1];
  double s = 0.0;
  const long long t0 = clock64();
#pragma unroll 16
  for (int i = 0; i < n; ++i) s = Fma ? __fma_rn(a, b, s) : s + a;
  cycles[0] = clock64() - t0;
  out[0] = s;
}

std::vector<Scalar> values(Index n, unsigned seed) {
  std::vector<Scalar> v(static_cast<std::size_t>(n));
  unsigned long long state = seed;
  for (auto& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>(state >> 11) * 0x1p-53 * 2.0 - 1.0;
  }
  return v;
}

int run() {
  auto device = ok(osprey::CudaDevice::open(), "open the cuda device");
  ExactCuda h(device);
  bool allSame = true;
  const auto result = [](const std::string& name, float us) { std::printf("RESULT|%s|us|%.2f\n", name.c_str(), us); };
  {
    const auto x = ok(h.fromList(values(2, 1)), "upload");
    double* out = nullptr;
    long long* cycles = nullptr;
    check(cudaMalloc(&out, sizeof(double)), "alloc");
    check(cudaMalloc(&cycles, sizeof(long long)), "alloc");
    long long add = 0, fma = 0;
    chainProbe<false><<<1, 32>>>(out, x.data(), 3072, cycles);
    check(cudaMemcpy(&add, cycles, sizeof add, cudaMemcpyDeviceToHost), "probe");
    chainProbe<true><<<1, 32>>>(out, x.data(), 3072, cycles);
    check(cudaMemcpy(&fma, cycles, sizeof fma, cudaMemcpyDeviceToHost), "probe");
    std::printf("dependent fp64 chain: add %.2f cycles a step, fma %.2f\n", add / 3072.0, fma / 3072.0);
    std::printf("RESULT|dependent fp64 add|cycles|%.2f\nRESULT|dependent fp64 fma|cycles|%.2f\n", add / 3072.0,
                fma / 3072.0);
    cudaFree(out);
    cudaFree(cycles);
  }
  constexpr Index C = 768;
  for (const Index N : {Index{1}, Index{4096}}) {
    const auto x = ok(h.fromList(values(N * C, 2)), "upload");
    const auto dout = ok(h.fromList(values(N * C, 3)), "upload");
    const auto w = ok(h.fromList(values(C, 4)), "upload");
    const auto b = ok(h.fromList(values(C, 5)), "upload");
    const auto ref = ok(reference::layernormForward(h, x, w, b, N, C), "reference forward");
    const auto refGrads = ok(reference::layernormBackward(h, dout, x, w, ref.mean, ref.rstd, N, C), "reference backward");
    auto one = ok(h.layernormForward(x, w, b, N, C), "one-launch forward");
    auto oneGrads = ok(h.layernormBackward(dout, x, w, ref.mean, ref.rstd, N, C), "one-launch backward");
    const bool forwardSame = same(read(one.out), read(ref.out)) && same(read(one.mean), read(ref.mean)) &&
                             same(read(one.rstd), read(ref.rstd));
    const bool backwardSame = same(read(oneGrads.dx), read(refGrads.dx)) && same(read(oneGrads.dw), read(refGrads.dw)) &&
                              same(read(oneGrads.db), read(refGrads.db));
    std::printf("%lld rows of %lld: forward == reference %s, backward == reference %s\n", static_cast<long long>(N),
                static_cast<long long>(C), forwardSame ? "yes" : "NO", backwardSame ? "yes" : "NO");
    allSame = allSame && forwardSame && backwardSame;
    check(cudaDeviceSynchronize(), "the checks");

    // The kernels alone, on the handler's buffers (their outputs overwritten with the same values).
    const int perBlock = rows::rowsPerBlock(C);
    const auto blocks = static_cast<unsigned>((N + perBlock - 1) / perBlock);
    const std::size_t shared = static_cast<std::size_t>(perBlock) * (C + 1) * sizeof(double);
    const float forward = microseconds([&] {
      rows::layerNormRows<<<blocks, rows::kThreads, shared>>>(one.out.data(), one.mean.data(), one.rstd.data(), x.data(),
                                                               w.data(), b.data(), N, C, perBlock);
    });
    const int perBlockB = rows::rowsPerBlock(2 * (C + 1) - 1);
    const auto blocksB = static_cast<unsigned>((N + perBlockB - 1) / perBlockB);
    const std::size_t sharedB = 2 * static_cast<std::size_t>(perBlockB) * (C + 1) * sizeof(double);
    const float backward = microseconds([&] {
      rows::layerNormBackwardRows<<<blocksB, rows::kThreads, sharedB>>>(oneGrads.dx.data(), dout.data(), x.data(),
                                                                        w.data(), ref.mean.data(), ref.rstd.data(), N, C,
                                                                        perBlockB);
    });
    const std::string shape = std::to_string(N) + "x" + std::to_string(C);
    std::printf("  forward (one launch) %.2f us, backward's dx %.2f us\n", forward, backward);
    result("layernorm forward " + shape, forward);
    result("layernorm backward dx " + shape, backward);

    // Each shape of the column kernel: dw and db checked against the reference's, then timed.
    const auto wantDw = read(refGrads.dw), wantDb = read(refGrads.db);
    const auto columns = [&]<int Cols, int Depth, int Threads, int Ahead>(const char* name) {
      const auto launch = [&] {
        rows::layerNormParamGradColumns<Cols, Depth, Threads, Ahead><<<static_cast<unsigned>((C + Cols - 1) / Cols), Threads>>>(
            oneGrads.dw.data(), oneGrads.db.data(), dout.data(), x.data(), ref.mean.data(), ref.rstd.data(), N, C);
      };
      launch();
      check(cudaDeviceSynchronize(), name);
      const bool bits = same(read(oneGrads.dw), wantDw) && same(read(oneGrads.db), wantDb);
      allSame = allSame && bits;
      const float us = microseconds(launch);
      std::printf("  dw, db down the columns, %s: %.2f us%s\n", name, us, bits ? "" : "  (DIFFERS from the reference)");
      result(std::string("layernorm dw db ") + name + " " + shape, us);
    };
    columns.template operator()<rows::kGradCols, rows::kGradDepth, rows::kGradThreads, rows::kAhead>("default");
    columns.template operator()<8, 128, 256, 4>("8 columns, 128 rows, 4 ahead");
    columns.template operator()<4, 128, 128, 8>("4 columns, 128 rows, 128 threads");
    columns.template operator()<8, 64, 256, 4>("8 columns, 64 rows, 4 ahead");
    columns.template operator()<16, 64, 256, 4>("16 columns, 64 rows, 4 ahead");
  }
  std::printf("RESULT|layernorm kernels == reference|%s|\n", allSame ? "PASS" : "FAIL");
  return allSame ? 0 : 1;
}

}  // namespace
}  // namespace gpt2::bench

int main() {
  try {
    return gpt2::bench::run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "osprey_layernorm_bench: %s\n", e.what());
    return 2;
  }
}
