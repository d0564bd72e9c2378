// A kernel that calls a constexpr host function of the standard library (std::string_view::size)
// is rejected when it is compiled for the device: nvcc's warning #20013-D ("calling a constexpr
// __host__ function from a __host__ __device__ function is not allowed") is an error in Osprey's
// CUDA build, and the message names the function. (nvcc would accept it with
// --expt-relaxed-constexpr; Osprey does not pass that flag, so the standard library stays on the
// host.) Its twin computes the length itself.
// EXPECT: calling a constexpr __host__ function("size")
#include <string_view>

#include "osprey/gpu/cuda/handler.hpp"

namespace osprey::compile_fail {

Result<GpuCuda::Buffer> labelled(GpuCuda& h, Index n) {
  return h.build(n, [=] OSPREY_FN(Index i) -> Scalar {
#if defined(OSPREY_POSITIVE_TWIN)
    const Index length = 5;
#else
    const Index length = static_cast<Index>(std::string_view("token").size());
#endif
    return static_cast<Scalar>(i + length);
  });
}

}  // namespace osprey::compile_fail
