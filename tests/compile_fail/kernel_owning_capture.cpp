// A kernel that captures an owning type (here a std::vector, copied into the closure) is
// rejected by build: the closure must be trivially copyable so it can travel to a device and be
// copied into every thread (DESIGN.md §2, "Kernels read other buffers"). Its twin captures a View.
// EXPECT: Closure<F>
#include <vector>

#include "osprey/lists/lists.hpp"

namespace osprey::compile_fail {

Result<Lists::Buffer> doubled(Lists& h, const std::vector<Scalar>& weights) {
  const Index n = static_cast<Index>(weights.size());
#if defined(OSPREY_POSITIVE_TWIN)
  const View w{weights.data(), n};
  return h.build(n, [w](Index i) -> Scalar { return w[i] * 2.0; });
#else
  return h.build(n, [weights](Index i) -> Scalar { return weights[static_cast<std::size_t>(i)] * 2.0; });
#endif
}

}  // namespace osprey::compile_fail
