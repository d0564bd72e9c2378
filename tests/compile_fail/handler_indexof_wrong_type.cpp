// A handler answering `indexOf` with the wrong type (a bare int instead of Result<Index>) does not
// satisfy the effect, and the compiler names indexOf.
// EXPECT: operation indexOf(b, x) missing or mistyped
#include "minimal_handler.hpp"

namespace osprey::compile_fail {

class MistypesIndexOf {
 public:
  OSPREY_MINIMAL_HANDLER_COMMON_OPS;

  template <Combine C>
  Result<Buffer> zipWith(const Buffer& a, const Buffer& b, C combine) {
    return m_lists.zipWith(a, b, combine);
  }
  template <Combine C>
  Result<Scalar> reduce(const Buffer& b, Scalar seed, C combine) {
    return m_lists.reduce(b, seed, combine);
  }
#if defined(OSPREY_POSITIVE_TWIN)
  Result<Index> indexOf(const Buffer& b, Scalar x) { return m_lists.indexOf(b, x); }
#else
  int indexOf(const Buffer& b, Scalar x) { return static_cast<int>(*m_lists.indexOf(b, x)); }
#endif
};

OSPREY_ASSERT_HANDLER(MistypesIndexOf, "mistypes-indexOf");

}  // namespace osprey::compile_fail
