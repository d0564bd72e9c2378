// strictly(work) and Int: every fault kind halts the run with an error naming the operation and
// its operands, and nothing after the fault executes (DESIGN.md §3, "strictly").
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "osprey/result.hpp"
#include "osprey/strict.hpp"

namespace osprey {
namespace {

constexpr Index kMax = std::numeric_limits<Index>::max();
constexpr Index kMin = std::numeric_limits<Index>::min();

enum class Op { Add, Sub, Mul, Div, Rem };

// Applies one checked operation; kept out of line so the operands are not constants the test
// could accidentally fold away.
Int apply(Op op, Int a, Int b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Rem: return a % b;
  }
  return 0;
}

struct FaultCase {
  const char* label;
  Op op;
  Index a, b;
  const char* message;
};

const FaultCase kFaults[] = {
    {"add overflow", Op::Add, kMax, 1, "integer overflow: 9223372036854775807 + 1"},
    {"add underflow", Op::Add, kMin, -1, "integer overflow: -9223372036854775808 + -1"},
    {"sub overflow", Op::Sub, kMin, 1, "integer overflow: -9223372036854775808 - 1"},
    {"sub of min", Op::Sub, 0, kMin, "integer overflow: 0 - -9223372036854775808"},
    {"mul overflow", Op::Mul, kMax, 2, "integer overflow: 9223372036854775807 * 2"},
    {"mul negative overflow", Op::Mul, kMin, -1, "integer overflow: -9223372036854775808 * -1"},
    {"mul big squares", Op::Mul, 3037000500, 3037000500, "integer overflow: 3037000500 * 3037000500"},
    {"division by zero", Op::Div, 7, 0, "division by zero: 7 / 0"},
    {"INT64_MIN / -1", Op::Div, kMin, -1, "integer overflow: -9223372036854775808 / -1"},
    {"remainder by zero", Op::Rem, 7, 0, "remainder by zero: 7 % 0"},
    {"remainder of zero by zero", Op::Rem, 0, 0, "remainder by zero: 0 % 0"},
};

TEST(Strictly, EachFaultKindNamesOperationAndOperands) {
  for (const FaultCase& c : kFaults) {
    SCOPED_TRACE(c.label);
    bool after = false;
    auto r = strictly([&] {
      Int x = apply(c.op, c.a, c.b);
      after = true;  // must never run: the fault halts the work
      return x.raw();
    });
    ASSERT_FALSE(r.ok()) << "no fault; got " << *r;
    EXPECT_EQ(r.error().message, c.message);
    EXPECT_FALSE(after) << "work continued after the fault";
  }
}

TEST(Strictly, ResultsJustInsideTheRangeAreExact) {
  auto r = strictly([] {
    Int m = apply(Op::Add, kMax - 1, 1);
    Int n = apply(Op::Sub, kMin + 1, 1);
    Int p = apply(Op::Mul, 3037000499, 3037000499);
    Int q = apply(Op::Div, kMin, 1);
    Int s = apply(Op::Rem, -7, 3);
    return (m == Int(kMax)) && (n == Int(kMin)) && p.raw() == 9223372030926249001 && q == Int(kMin) && s == Int(-1);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(*r);
}

// INT64_MIN % -1 is 0 mathematically; x86's idiv would trap on it, so Int computes it as 0.
TEST(Strictly, MinRemainderMinusOneIsZero) {
  auto r = strictly([] { return apply(Op::Rem, kMin, -1).raw(); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, 0);
}

TEST(Strictly, UnaryMinusOfMinFaults) {
  auto r = strictly([] { return (-Int(kMin)).raw(); });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("integer overflow"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("-9223372036854775808"), std::string::npos) << r.error().message;
}

TEST(Strictly, CompoundAssignmentsAreChecked) {
  int steps = 0;
  auto r = strictly([&] {
    Int x = kMax / 4;
    for (int k = 0; k < 10; ++k) {
      x *= 2;  // faults on the third doubling
      ++steps;
    }
    return x.raw();
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "integer overflow: 9223372036854775804 * 2");
  EXPECT_EQ(steps, 2) << "the loop went on after the fault";
}

// Work that returns nothing, a Result, or a plain value: a fault becomes the Error in each case.
TEST(Strictly, VoidWorkStopsAtTheFault) {
  int counter = 0;
  Result<void> r = strictly([&] {
    ++counter;
    Int z = apply(Op::Div, 1, 0);
    ++counter;
    (void)z;
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "division by zero: 1 / 0");
  EXPECT_EQ(counter, 1);
}

TEST(Strictly, ResultWorkPassesErrorsAndValuesThrough) {
  bool after = false;
  Result<int> faulted = strictly([&]() -> Result<int> {
    Int z = apply(Op::Rem, 9, 0);
    after = true;
    return static_cast<int>(z.raw());
  });
  ASSERT_FALSE(faulted.ok());
  EXPECT_EQ(faulted.error().message, "remainder by zero: 9 % 0");
  EXPECT_FALSE(after);

  Result<int> failed = strictly([]() -> Result<int> { return Error{"the work's own error"}; });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "the work's own error");

  Result<int> fine = strictly([]() -> Result<int> { return 42; });
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(*fine, 42);
}

// Without strictly, a fault is an exception carrying the same words: never a wrapped value.
TEST(Strictly, FaultOutsideStrictlyIsAStrictFault) {
  try {
    Int x = apply(Op::Mul, kMax, 2);
    FAIL() << "no fault; got " << x.raw();
  } catch (const StrictFault& f) {
    EXPECT_EQ(std::string(f.what()), "integer overflow: 9223372036854775807 * 2");
    EXPECT_EQ(f.kind(), FaultKind::Mul);
    EXPECT_EQ(f.lhs(), kMax);
    EXPECT_EQ(f.rhs(), 2);
  }
}

}  // namespace
}  // namespace osprey
