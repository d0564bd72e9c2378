// Which cuBLASLt algorithm each product shape of a Fast handler runs: chosen once a shape, by
// timing the heuristic's candidates that sum exactly as its first one does. nvcc units only.
//
// cublasLtMatmulAlgoGetHeuristic orders its candidates by an estimate; on the H200 its first pick
// for a model's products was often not the fastest (bench/cuda/NOTES.md, thirteenth run). Timing the candidates is cuBLASLt's documented way to find the best, and
// it must not make the results depend on a stopwatch: a candidate is timed only where it splits
// the sum over k as the first does (the same split-k count and reduction scheme). Such candidates
// differ in how the output is tiled, not in any element's sum, so they give the first one's bits
// (Fast.TunedProductsKeepTheFirstCandidatesBits checks it on the device; the H200 probe found no
// exception among GPT-2's shapes), and the result is the same whichever wins.
//
// Each candidate runs once to warm up, then kRuns times between two events, on the product's own
// operands: a product whose output is also its addend (beta 1, C = D) cannot be run again, and
// keeps the first candidate; so does a product of fewer than kTimedWork multiply-adds (a decoded
// token's, a short prompt's), where timing would cost more than any candidate could save. Nothing
// is timed while the stream is being captured into a graph (the events would be graph nodes); the
// first candidate runs there, and the shape is left to be chosen at its first run outside one.
// Every candidate meets the preference's default alignment (256 bytes), as the first one did.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/lt_choices.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "osprey/gpu/cuda/cublas_check.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/result.hpp"

namespace osprey {

class LtChoices {
 public:
  // Everything that sets a product's algorithm apart: sizes, leading dimensions, transposes,
  // element and compute types, epilogue, and whether an addend is read.
  using Key = std::array<std::int64_t, 12>;
  static constexpr int kCandidates = 8;  // asked of the heuristic
  static constexpr int kRuns = 3;        // timed runs of each candidate
  static constexpr double kTimedWork = 2147483648.0;  // 2^31 multiply-adds: about 5 µs of bf16 products

  // What a product asks for, described once (desc, layouts and preference as cublasLtMatmul gets
  // them); run(algo) queues the product with that algorithm and returns cuBLAS's status.
  struct Product {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulPreference_t preference;
    cudaStream_t stream;
    bool mayRunAgain;  // false when the output is also the addend
    double work;       // multiply-adds: m·n·k
  };

  // The algorithm for `key`: the one chosen before, else the heuristic's candidates timed (see the
  // top of this file); none when the heuristic has none for the shape.
  template <class Run>
  Result<std::optional<cublasLtMatmulAlgo_t>> choose(const Key& key, const Product& p, Run run) {
    bool tuning = true;
    {
      std::lock_guard lock(m_mutex);
      tuning = m_tuning;
      if (const auto at = m_chosen.find(key); tuning && at != m_chosen.end()) return std::optional{at->second};
    }
    std::array<cublasLtMatmulHeuristicResult_t, kCandidates> found{};
    int count = 0;
    const cublasStatus_t asked = cublasLtMatmulAlgoGetHeuristic(p.lt, p.desc, p.a, p.b, p.c, p.d, p.preference,
                                                                kCandidates, found.data(), &count);
    if (asked == CUBLAS_STATUS_NOT_SUPPORTED || (asked == CUBLAS_STATUS_SUCCESS && count < 1))
      return std::optional<cublasLtMatmulAlgo_t>{};
    OSPREY_CUBLAS_CHECK(asked, "asking cuBLASLt for its algorithms");
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    OSPREY_CUDA_CHECK(cudaStreamIsCapturing(p.stream, &capturing), "choosing a product's algorithm");
    if (!tuning || capturing != cudaStreamCaptureStatusNone) return std::optional{found[0].algo};
    std::vector<cublasLtMatmulAlgo_t> same;  // the candidates that split k as the first does
    for (int i = 0; i < count; ++i)
      if (splitOf(found[i].algo) == splitOf(found[0].algo)) same.push_back(found[i].algo);
    cublasLtMatmulAlgo_t best = found[0].algo;
    const bool timing = p.mayRunAgain && p.work >= kTimedWork && same.size() > 1;
    if (timing) best = OSPREY_TRY(fastest(same, p.stream, run));
    std::lock_guard lock(m_mutex);
    m_chosen.emplace(key, best);
    m_timed += timing;
    return std::optional{best};
  }

  // Off: every product runs the heuristic's first candidate, and nothing is chosen or kept.
  void setTuning(bool on) {
    std::lock_guard lock(m_mutex);
    m_tuning = on;
  }
  // Shapes chosen so far, and how many of them by timing.
  std::size_t chosen() const {
    std::lock_guard lock(m_mutex);
    return m_chosen.size();
  }
  std::size_t timed() const {
    std::lock_guard lock(m_mutex);
    return m_timed;
  }

 private:
  // How an algorithm splits the sum over k: its split-k count and reduction scheme.
  static std::pair<int, int> splitOf(const cublasLtMatmulAlgo_t& algo) {
    std::uint32_t splits = 1, scheme = 0;
    std::size_t written = 0;
    (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits),
                                               &written);
    (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme),
                                               &written);
    return {static_cast<int>(splits), static_cast<int>(scheme)};
  }

  // The candidate with the least time for kRuns runs; one that fails to run is passed over (the
  // first always runs: the heuristic offered it for these descriptors).
  template <class Run>
  static Result<cublasLtMatmulAlgo_t> fastest(const std::vector<cublasLtMatmulAlgo_t>& candidates, cudaStream_t stream,
                                               Run& run) {
    struct Events {
      cudaEvent_t start = nullptr, end = nullptr;
      ~Events() {
        if (start) (void)cudaEventDestroy(start);
        if (end) (void)cudaEventDestroy(end);
      }
    } events;
    OSPREY_CUDA_CHECK(cudaEventCreate(&events.start), "timing a product's algorithms");
    OSPREY_CUDA_CHECK(cudaEventCreate(&events.end), "timing a product's algorithms");
    cublasLtMatmulAlgo_t best = candidates[0];
    float bestMs = std::numeric_limits<float>::infinity();
    for (const auto& algo : candidates) {
      if (run(algo) != CUBLAS_STATUS_SUCCESS) continue;  // the warm-up run
      OSPREY_CUDA_CHECK(cudaEventRecord(events.start, stream), "timing a product's algorithms");
      bool ran = true;
      for (int r = 0; r < kRuns && ran; ++r) ran = run(algo) == CUBLAS_STATUS_SUCCESS;
      OSPREY_CUDA_CHECK(cudaEventRecord(events.end, stream), "timing a product's algorithms");
      OSPREY_CUDA_CHECK(cudaEventSynchronize(events.end), "timing a product's algorithms");
      float ms = 0.0f;
      OSPREY_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.end), "timing a product's algorithms");
      if (ran && ms < bestMs) bestMs = ms, best = algo;
    }
    return best;
  }

  mutable std::mutex m_mutex;
  std::map<Key, cublasLtMatmulAlgo_t> m_chosen;
  std::size_t m_timed = 0;
  bool m_tuning = true;
};

}  // namespace osprey
