// zipWith can fail (length mismatch), so it must return Result<Buffer>; a handler returning a
// bare Buffer does not satisfy the effect, and the compiler names zipWith.
// EXPECT: operation zipWith(a, b, combine) missing or mistyped
#include "minimal_handler.hpp"

namespace osprey::compile_fail {

class InfallibleZipWith {
 public:
  OSPREY_MINIMAL_HANDLER_COMMON_OPS;

#if defined(OSPREY_POSITIVE_TWIN)
  template <Combine C>
  Result<Buffer> zipWith(const Buffer& a, const Buffer& b, C combine) {
    return m_lists.zipWith(a, b, combine);
  }
#else
  template <Combine C>
  Buffer zipWith(const Buffer& a, const Buffer& b, C combine) {
    return *m_lists.zipWith(a, b, combine);
  }
#endif
  template <Combine C>
  Result<Scalar> reduce(const Buffer& b, Scalar seed, C combine) {
    return m_lists.reduce(b, seed, combine);
  }
  Result<Index> indexOf(const Buffer& b, Scalar x) { return m_lists.indexOf(b, x); }
};

OSPREY_ASSERT_HANDLER(InfallibleZipWith, "infallible-zipWith");

}  // namespace osprey::compile_fail
