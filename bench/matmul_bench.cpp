// matMul on lists and on gpu(host): the exact product, checked bit for bit between the two
// handlers before anything is timed.
//
// Work per product: 2 * M * N * K floating-point operations (one multiply and one add per k per
// output); the GFLOP/s counter is that count divided by wall-clock time. gpu(host) uses every
// core OpenMP gives it (OMP_NUM_THREADS), lists one. Exact means no FMA: the peak is half of
// what a fused kernel could reach.
//
//   osprey_bench_matmul [--benchmark_filter=...] [--benchmark_repetitions=N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <omp.h>

#include "osprey/gpu/host/handler.hpp"
#include "osprey/lists/lists.hpp"
#include "random_values.hpp"

namespace osprey::bench {
namespace {

struct Shape {
  Index m, k, n;  // (M, K) x (K, N) -> (M, N)
};
constexpr Shape kShapes[] = {{768, 768, 768}};

struct Inputs {
  std::vector<Scalar> a, b;
};
Inputs inputsFor(Shape s) {
  return {randomValues(static_cast<std::size_t>(s.m * s.k), 1), randomValues(static_cast<std::size_t>(s.k * s.n), 2)};
}

std::vector<Scalar> toHost(Lists&, const Lists::Buffer& b) { return b.values(); }
std::vector<Scalar> toHost(GpuHost&, const GpuHost::Buffer& b) { return *fromGpu(b); }

template <class H>
Result<std::vector<Scalar>> productOn(H& h, const Inputs& in, Shape s) {
  auto a = OSPREY_TRY(h.fromList(std::span<const Scalar>(in.a)));
  auto b = OSPREY_TRY(h.fromList(std::span<const Scalar>(in.b)));
  auto c = OSPREY_TRY(h.matMul(a, b, s.m, s.k, s.n));
  return toHost(h, c);
}

// Before timing: lists and gpu(host) must give the same bits for every shape benchmarked.
bool handlersAgree() {
  Lists lists;
  GpuHost host(*HostDevice::open());
  for (Shape s : kShapes) {
    const Inputs in = inputsFor(s);
    auto x = productOn(lists, in, s);
    auto y = productOn(host, in, s);
    if (!x.ok() || !y.ok()) {
      std::fprintf(stderr, "matMul %lldx%lldx%lld failed: %s\n", (long long)s.m, (long long)s.k, (long long)s.n,
                   (!x.ok() ? x.error() : y.error()).message.c_str());
      return false;
    }
    for (std::size_t i = 0; i < x->size(); ++i)
      if (std::memcmp(&(*x)[i], &(*y)[i], sizeof(Scalar)) != 0) {
        std::fprintf(stderr, "matMul %lldx%lldx%lld: lists and gpu(host) differ at output %zu: %.17g vs %.17g\n",
                     (long long)s.m, (long long)s.k, (long long)s.n, i, (*x)[i], (*y)[i]);
        return false;
      }
    std::printf("matMul %lldx%lldx%lld: lists and gpu(host) agree bit for bit on all %zu outputs\n",
                (long long)s.m, (long long)s.k, (long long)s.n, x->size());
  }
  return true;
}

template <class H>
void timeMatMul(benchmark::State& state, H h, Shape s) {
  const Inputs in = inputsFor(s);
  auto a = h.fromList(std::span<const Scalar>(in.a));
  auto b = h.fromList(std::span<const Scalar>(in.b));
  if (!a.ok() || !b.ok()) {
    state.SkipWithError("fromList failed");
    return;
  }
  // Wall-clock time over the timed loop: gpu(host) runs on several threads, so CPU time of the
  // calling thread would overstate its speed.
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto c = h.matMul(*a, *b, s.m, s.k, s.n);
    if (!c.ok()) {
      state.SkipWithError(c.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(c);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  state.counters["GFLOP/s"] = flops * static_cast<double>(state.iterations()) / seconds / 1e9;
  state.SetLabel(h.device());
}

void registerAll() {
  for (Shape s : kShapes) {
    const std::string dims = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
    benchmark::RegisterBenchmark(("matMul/lists/" + dims).c_str(), [s](benchmark::State& st) { timeMatMul(st, Lists{}, s); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0);
    benchmark::RegisterBenchmark(("matMul/gpu(host)/" + dims).c_str(),
                                 [s](benchmark::State& st) { timeMatMul(st, GpuHost(*HostDevice::open()), s); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0);
  }
}

}  // namespace
}  // namespace osprey::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  if (!osprey::bench::handlersAgree()) return 1;  // never time a wrong answer
  osprey::bench::registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
