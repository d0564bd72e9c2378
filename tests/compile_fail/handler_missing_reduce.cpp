// A handler that forgets `reduce` does not satisfy the effect, and the compiler says which
// operation is missing (DESIGN.md §2, "Totality is checked by the compiler").
// EXPECT: operation reduce(b, seed, combine) missing or mistyped
#include "minimal_handler.hpp"

namespace osprey::compile_fail {

class ForgetsReduce {
 public:
  OSPREY_MINIMAL_HANDLER_COMMON_OPS;

  template <Combine C>
  Result<Buffer> zipWith(const Buffer& a, const Buffer& b, C combine) {
    return m_lists.zipWith(a, b, combine);
  }
  Result<Index> indexOf(const Buffer& b, Scalar x) { return m_lists.indexOf(b, x); }
#if defined(OSPREY_POSITIVE_TWIN)
  template <Combine C>
  Result<Scalar> reduce(const Buffer& b, Scalar seed, C combine) {
    return m_lists.reduce(b, seed, combine);
  }
#endif
};

OSPREY_ASSERT_HANDLER(ForgetsReduce, "forgets-reduce");

}  // namespace osprey::compile_fail
