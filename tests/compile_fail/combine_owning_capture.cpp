// A combine that captures an owning handle (a std::shared_ptr) is rejected by zipWith for the
// same reason as an owning kernel: Combine requires a trivially copyable Closure.
// EXPECT: Closure<F>
#include <memory>

#include "osprey/lists/lists.hpp"

namespace osprey::compile_fail {

Result<Lists::Buffer> scaled(Lists& h, const Lists::Buffer& a, const Lists::Buffer& b) {
#if defined(OSPREY_POSITIVE_TWIN)
  const Scalar scale = 3.0;
  return h.zipWith(a, b, [scale](Scalar x, Scalar y) -> Scalar { return (x + y) * scale; });
#else
  auto scale = std::make_shared<Scalar>(3.0);
  return h.zipWith(a, b, [scale](Scalar x, Scalar y) -> Scalar { return (x + y) * *scale; });
#endif
}

}  // namespace osprey::compile_fail
