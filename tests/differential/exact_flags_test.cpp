// The exact contract's flags (docs/EXACTNESS.md), checked where the compiler can see them: a
// build given -ffast-math or any flag of its family does not compile. (Contraction leaves no
// trace in the preprocessor; configuration fails for it instead — exact_flags_check.cmake's
// probe — and tests/contract/fp_contract_test.cpp checks the generated code at run time.)
#include <cfloat>
#include <limits>

#include <gtest/gtest.h>

#if defined(__FAST_MATH__)
#error "-ffast-math breaks the exact contract (docs/EXACTNESS.md)"
#endif
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "-ffinite-math-only breaks the exact contract (docs/EXACTNESS.md)"
#endif
#if defined(__ASSOCIATIVE_MATH__)
#error "-fassociative-math (reassociated sums) breaks the exact contract (docs/EXACTNESS.md)"
#endif
#if defined(__RECIPROCAL_MATH__)
#error "-freciprocal-math breaks the exact contract (docs/EXACTNESS.md)"
#endif
#if defined(__NO_SIGNED_ZEROS__)
#error "-fno-signed-zeros breaks the exact contract (docs/EXACTNESS.md)"
#endif
#if !defined(OSPREY_FP_CONTRACT_OFF)
#error "built without Osprey's exact flags (CMakeLists.txt OSPREY_EXACT_FLAGS: -ffp-contract=off ...)"
#endif
#if defined(__GNUC__) && !defined(__clang__) && defined(__GCC_IEC_559) && __GCC_IEC_559 < 2
#error "g++ says IEEE 754 semantics are off (an unsafe-math flag): the exact contract needs them"
#endif
static_assert(FLT_EVAL_METHOD == 0,
              "doubles must be evaluated in double (x87 excess precision: use -msse2 -mfpmath=sse on i386)");

namespace {

// What the preprocessor checks above leave to the compiled code: doubles are IEEE binary64
// with subnormals, rounding to nearest.
TEST(ExactFlags, DoublesAreIeeeBinary64) {
  EXPECT_TRUE(std::numeric_limits<double>::is_iec559);
  EXPECT_EQ(std::numeric_limits<double>::digits, 53);
  EXPECT_EQ(std::numeric_limits<double>::round_style, std::round_to_nearest);
  volatile double smallest = std::numeric_limits<double>::denorm_min();
  EXPECT_GT(smallest, 0.0) << "subnormals are flushed to zero (-ffast-math's crtfastmath / FTZ)";
  EXPECT_EQ(smallest * 0.5, 0.0);  // ties to even: half the smallest subnormal rounds to 0
}

}  // namespace
