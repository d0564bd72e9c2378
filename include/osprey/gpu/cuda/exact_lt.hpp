// Exact products through cuBLASLt: FP64 algorithms that keep every output's k chain whole, each
// verified bit for bit against the cuda device's own tensor-core kernel before it is used.
// nvcc units only (src/gpu/cuda/exact_lt.cu, src/gpu/cuda/matmul.cu, tests).
//
// Why it may be used at all: on the H200, each cuBLASLt FP64 algorithm with split-K = 1 and no
// reduction scheme computed `acc = fma(a_k, b_k, acc)` for k ascending except for one case,
// guarded below (docs/EXACTNESS.md), and cuBLAS's FP64 kernels outrun the device's own DMMA kernel. Why it is verified:
// that is a measurement of one chip and library, not a documented guarantee. So, once per shape
// (and operand alignment), the heuristic's candidates that pass checkKeepsKWhole are run on
// adversarial operands of that shape (wide exponents, random signs, cancellation, signed zeros,
// subnormals) beside the own kernel; a candidate that differs in any bit of any output is never
// used for the shape. The verified candidates and the own kernel are then timed on those
// operands, and the fastest runs that shape from then on. Each choice gives the own kernel's bits,
// so a result never depends on which won.
//
// One difference was measured: where the chain ends at -0.0 (an underflowed negative sum),
// cuBLASLt gives +0.0. That needs an operand below 2^-250 in magnitude, so each product on
// cuBLASLt is preceded by a scan of its operands and followed by a kernel that, when the scan
// found such a value, recomputes every output as the plain chain (src/gpu/cuda/exact_lt.cu says
// why the bound suffices). Both are queued in stream order; nothing waits for the host.
//
// Nothing is chosen while the stream is being captured into a graph (the checks synchronise); the
// own kernel runs there unless the shape was chosen before. A shape whose check needs more memory
// than is spare (a quarter of what is free, at most 4 GiB) keeps the own kernel.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/exact_lt.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>

#include "osprey/config.hpp"
#include "osprey/result.hpp"
#include "osprey/transposed.hpp"

namespace osprey {

// An Error when `algo` would split one output's sum over k (split-K > 1, or any reduction scheme):
// a split chain is a different sum, never the exact contract's.
Result<void> checkKeepsKWhole(const cublasLtMatmulAlgo_t& algo);

// The device's own kernels for one product shape: out, a, b as launchExactMatMulBatched takes them
// (a or b held transposed where the product's layout says so). It must never come back here: it
// is what a cuBLASLt candidate is checked against, while the choice is being made.
using OwnExactProduct = std::function<cudaError_t(double* out, const double* a, const double* b)>;

// Queues `batch` row-major products out_z = a_z * b_z (rows x inner times inner x cols, one after
// another) on `stream`: on the cuBLASLt algorithm chosen for the shape, or with `own`. `layout`
// names an operand held transposed (osprey/transposed.hpp; batch 1 only), which cuBLASLt reads as
// it is. Returns cudaSuccess once queued, or the first CUDA error.
cudaError_t exactProductChosen(double* out, const double* a, const double* b, Index batch, Index rows, Index inner,
                               Index cols, cudaStream_t stream, const OwnExactProduct& own,
                               Transposed layout = Transposed::None);

// What was chosen so far on the current device: shapes that run on cuBLASLt, and shapes that keep
// the own kernel (none verified, or the own kernel faster).
struct ExactLtTally {
  int onLt = 0, onOwn = 0, refused = 0;  // refused: candidates that differed from the own kernel
};
ExactLtTally exactLtTally();

}  // namespace osprey
