// A kernel that calls a host-only function (here a logging function writing to stderr) is
// rejected when it is compiled for the device: nvcc's warning #20011-D ("calling a __host__
// function from a __host__ __device__ function is not allowed") is an error in Osprey's CUDA build
// (--diag-error=20011,20013,20014), and the message names the function. Its twin logs nothing.
//
// What this cannot catch: device-side printf. printf is a legal CUDA device function, so a kernel
// that prints compiles and runs (slowly, and with output interleaved across threads). Kernels must
// still not print; that rule is kept by review, not by the compiler.
// EXPECT: calling a __host__ function("osprey::compile_fail::logIndex(long)")
#include <cstdio>

#include "osprey/gpu/cuda/handler.hpp"

namespace osprey::compile_fail {

void logIndex(Index i) { std::fprintf(stderr, "building element %lld\n", static_cast<long long>(i)); }

Result<GpuCuda::Buffer> logged(GpuCuda& h, Index n) {
  return h.build(n, [=] OSPREY_FN(Index i) -> Scalar {
#if !defined(OSPREY_POSITIVE_TWIN)
    logIndex(i);
#endif
    return static_cast<Scalar>(i);
  });
}

}  // namespace osprey::compile_fail
