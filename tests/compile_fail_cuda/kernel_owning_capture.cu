// A device kernel that captures an owning type (a std::vector, copied into the closure) is
// rejected. Under nvcc the host pass sees every extended lambda through a wrapper type that is not
// trivially copyable, so the Closure concept accepts extended lambdas by their trait; the device
// pass sees the lambda's own type, and cuda.hpp's kernels assert there that it is trivially
// copyable. Its twin captures a View of the same values.
// EXPECT: a kernel closure must be trivially copyable
#include <vector>

#include "osprey/gpu/cuda/handler.hpp"

namespace osprey::compile_fail {

Result<GpuCuda::Buffer> weighted(GpuCuda& h, const std::vector<Scalar>& weights, const GpuCuda::Buffer& x) {
  const Index n = static_cast<Index>(weights.size());
#if defined(OSPREY_POSITIVE_TWIN)
  const View w = x.view();
  return h.build(n, [=] OSPREY_FN(Index i) -> Scalar { return w[i] * 2.0; });
#else
  (void)x;
  return h.build(n, [weights] OSPREY_FN(Index i) -> Scalar { return static_cast<Scalar>(i) * 2.0; });
#endif
}

}  // namespace osprey::compile_fail
