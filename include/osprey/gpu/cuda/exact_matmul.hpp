// The exact product's launchers (src/gpu/cuda/matmul.cu) and the tilings they may be asked for.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/exact_matmul.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <functional>

#include "osprey/config.hpp"
#include "osprey/transposed.hpp"

namespace osprey {

// Which tensor-core kernel a large exact product runs: Chosen, the fastest for the shape of the own
// kernel's estimated best tiling and the cuBLASLt algorithms verified to give its bits
// (osprey/gpu/cuda/exact_lt.hpp), or one tiling of the own kernel named, for tests and benchmarks
// that compare them (Square128Deep,
// 128 x 128 tiles with k in 32-deep slices, is never chosen: it is there to be measured). Every
// tiling gives the same bits; products with at most 8 rows, or at most 8 columns and fewer columns
// than rows, run on their own CUDA-core kernels whatever is asked.
// Own: the own kernel's estimated best tiling, never cuBLASLt (what a cuBLASLt choice is checked
// against, and what runs inside that check).
enum class ExactTiling : int { Own = -2, Chosen = -1, Square128, Wide128x144, Middle128x96, Small64, Square128Deep };

// The exact product (src/gpu/cuda/matmul.cu): out (rows x cols) = a (rows x inner) * b (inner x
// cols), row-major, each output the fma chain over k ascending from +0.0, queued on `stream` of
// the current device. Returns the launch status (cudaGetLastError after the launches); it does not
// wait for the kernel.
cudaError_t launchExactMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                              Index cols, int multiprocessors, cudaStream_t stream,
                              ExactTiling tiling = ExactTiling::Chosen);
// `batch` such products of one shape stored one after another (out, a and b each advance by one
// product's elements per product); bit for bit `batch` calls of launchExactMatMul.
// Whether a product of this shape runs on the tensor cores (neither its few-rows nor its
// few-columns kernel): the shapes exactProductChosen may put on cuBLASLt.
bool takesTensorCores(Index rows, Index cols);
cudaError_t launchExactMatMulBatched(Scalar* out, const Scalar* a, const Scalar* b, Index batch, Index rows,
                                     Index inner, Index cols, int multiprocessors, cudaStream_t stream,
                                     ExactTiling tiling = ExactTiling::Chosen);

// Device memory for copies: take(n) gives n doubles (nullptr when none can be had), give(p) hands
// them back once the work that reads them is queued: the cuda device's block cache hands a block
// out again only to later work on the same stream, which stream order runs after that work.
struct ExactScratch {
  std::function<double*(Index n)> take;
  std::function<void(double* p)> give;
};

// The product with one operand held transposed (osprey/transposed.hpp): out (rows x cols), each
// output the chain of the transposed copy's product. Tensor-core shapes read the held layout on a
// cuBLASLt algorithm verified for it (exactProductChosen); other shapes, and the own kernels that
// a choice is checked against, copy the held operand in `scratch` as the model's reference does.
cudaError_t launchExactMatMulTransposed(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                                        Index cols, Transposed layout, int multiprocessors, cudaStream_t stream,
                                        const ExactScratch& scratch);

}  // namespace osprey
