// Strict faults inside kernels, written once and run for every handler.
//
// A kernel's index maths (Int) that overflows or divides by zero at one element makes the
// launching operation return that fault's error, whatever device ran it (on the host it is
// thrown and caught per thread; on a device it is recorded in the fault slot). Each kernel faults
// at exactly one element, so the error's words do not depend on which thread got there first.
#pragma once

#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "osprey/effect.hpp"
#include "osprey/strict.hpp"

namespace osprey::testing::strict_cases {

inline constexpr Index kFaultSize = 10000;  // past the host device's parallel threshold
inline constexpr Index kFaultAt = 7777;

// ---- kernels ------------------------------------------------------------------------------------

// 1000 / (i - at): division by zero at element `at` only.
template <class H>
Result<BufferOf<H>> buildDividingByZeroAt(H& h, Index n, Index at) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    return toScalar((Int(1000) / (asInt(i) - Int(at))).raw());
  });
}

// An offset that overflows when doubled at element `at` only.
template <class H>
Result<BufferOf<H>> buildOverflowingAt(H& h, Index n, Index at) {
  // Limits are read outside the kernel: numeric_limits' members are host-only functions to nvcc.
  const Index big = std::numeric_limits<Index>::max();
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto offset = select(i == at, Int(big), asInt(i));
    return toScalar((offset * Int(2)).raw());
  });
}

// The same kernel shape with no faulting element: proves the kernels above fail only by design.
template <class H>
Result<BufferOf<H>> buildDoubling(H& h, Index n) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> { return toScalar((asInt(i) * Int(2)).raw()); });
}

// x % y on integral values: remainder by zero where y is 0.
template <class H>
Result<BufferOf<H>> zipRemainder(H& h, const BufferOf<H>& x, const BufferOf<H>& y) {
  using S = KernelScalar<H>;
  return h.zipWith(x, y, [=] OSPREY_FN(S a, S b) -> S {
    return toScalar((asInt(toIndex(a)) % asInt(toIndex(b))).raw());
  });
}

// Sums, except that meeting `poison` underflows an Int.
template <class H>
Result<Scalar> reduceUnderflowingAt(H& h, const BufferOf<H>& x, Scalar poison) {
  const Index smallest = std::numeric_limits<Index>::min();
  using S = KernelScalar<H>;
  return h.reduce(x, 0.0, [=] OSPREY_FN(S acc, S v) -> S {
    return when(
        v == poison, [&] { return toScalar((IntFor<S>(smallest) - Int(1)).raw()); }, [&] { return acc + v; });
  });
}

// element i = i, except 0 at `at`.
template <class H>
Result<BufferOf<H>> buildWithZeroAt(H& h, Index n, Index at) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> { return select(i == at, 0.0, toScalar(i + 1)); });
}

// ---- cases --------------------------------------------------------------------------------------

template <class H>
void buildReturnsDivisionByZeroOfOneElement(H& h) {
  for (Index n : {Index{kFaultAt + 1}, kFaultSize, Index{50257}}) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    auto b = buildDividingByZeroAt(h, n, kFaultAt);
    ASSERT_FALSE(b.ok()) << "the kernel divided by zero at element " << kFaultAt << " and build succeeded";
    EXPECT_EQ(b.error().message, "division by zero: 1000 / 0");
  }
}

template <class H>
void buildReturnsOverflowOfOneElement(H& h) {
  auto b = buildOverflowingAt(h, kFaultSize, kFaultAt);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message, "integer overflow: 9223372036854775807 * 2");

  auto fine = buildDoubling(h, kFaultSize);
  ASSERT_TRUE(fine.ok()) << fine.error().message;
  EXPECT_EQ(h.get(*fine, kFaultSize - 1), static_cast<Scalar>(2 * (kFaultSize - 1)));
}

// Index maths on both sides of 32 bits: a device takes 32-bit instructions where the operands fit
// (osprey/strict.hpp), and the quotients, remainders and products must be the 64-bit ones. Each
// element takes a pair (a, b) from the table; the results are exact in a double (< 2^53).
template <class H>
void indexMathAcrossThirtyTwoBitsIsExact(H& h) {
  const std::vector<Index> pairs = {
      0, 1, 7, 3, 2147483647, 2, 2147483648LL, 2, 4294967295LL, 3, 4294967296LL, 3, 4294967297LL, 4294967295LL,
      4294967295LL, 4294967295LL, 4294967295LL, 65536, 123456789012345LL, 97, 3, 4294967296LL, -7, 2, -2147483648LL,
      3, -2147483649LL, 5, 2147483647, -2147483648LL, 65535, 65537, -1, 4294967295LL, 1000000007, 1000000009};
  const std::size_t n = pairs.size() / 2;
  std::vector<Scalar> as, bs;
  for (std::size_t i = 0; i < n; ++i) {
    as.push_back(static_cast<Scalar>(pairs[2 * i]));
    bs.push_back(static_cast<Scalar>(pairs[2 * i + 1]));
  }
  const auto take = [](auto r) {
    if (!r.ok()) throw std::runtime_error(r.error().message);
    return std::move(r).value();
  };
  auto av = take(h.fromList(std::span<const Scalar>(as))), bv = take(h.fromList(std::span<const Scalar>(bs)));
  const auto va = av.view(), vb = bv.view();
  using I = KernelIndex<H>;
  using S = KernelScalar<H>;
  const auto quotients = readAll(h, take(h.build(static_cast<Index>(n), [=] OSPREY_FN(I i) -> S {
    return toScalar((asInt(toIndex(va[i])) / asInt(toIndex(vb[i]))).raw());
  })));
  const auto remainders = readAll(h, take(h.build(static_cast<Index>(n), [=] OSPREY_FN(I i) -> S {
    return toScalar((asInt(toIndex(va[i])) % asInt(toIndex(vb[i]))).raw());
  })));
  // Products below 2^53 (the table's first operand scaled down where needed), so a double holds them.
  const auto products = readAll(h, take(h.build(static_cast<Index>(n), [=] OSPREY_FN(I i) -> S {
    const auto a = asInt(toIndex(va[i])), b = asInt(toIndex(vb[i]));
    return toScalar(((a / Int(4096)) * (b / Int(4096)) + a % Int(4096) * b).raw());
  })));
  std::vector<Scalar> wantQ, wantR, wantP;
  for (std::size_t i = 0; i < n; ++i) {
    const Index a = pairs[2 * i], b = pairs[2 * i + 1];
    wantQ.push_back(static_cast<Scalar>(a / b));
    wantR.push_back(static_cast<Scalar>(a % b));
    wantP.push_back(static_cast<Scalar>((a / 4096) * (b / 4096) + a % 4096 * b));
  }
  EXPECT_SAME_BITS(quotients, wantQ);
  EXPECT_SAME_BITS(remainders, wantR);
  EXPECT_SAME_BITS(products, wantP);
  // A product that leaves int64 still faults, whatever the operands' width.
  const Index big = 4294967296LL;
  auto overflow = h.build(3, [=] OSPREY_FN(I i) -> S { return toScalar((Int(big) * (asInt(i) + big / 2)).raw()); });
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.error().message.find("integer overflow: 4294967296 * 21474836"), std::string::npos)
      << overflow.error().message;
}

// A fault in one launch leaves the handler usable: the next launch on it succeeds.
template <class H>
void handlerRecoversAfterAKernelFault(H& h) {
  auto bad = buildDividingByZeroAt(h, kFaultSize, 3);
  ASSERT_FALSE(bad.ok());
  auto good = buildDoubling(h, kFaultSize);
  ASSERT_TRUE(good.ok()) << "a launch after a fault failed: " << good.error().message;
  EXPECT_EQ(h.get(*good, 3), 6.0);
}

template <class H>
void zipWithReturnsRemainderByZero(H& h) {
  auto x = buildDoubling(h, kFaultSize);             // 0 2 4 ...
  auto y = buildWithZeroAt(h, kFaultSize, kFaultAt);  // 1 2 3 ... with 0 at kFaultAt
  ASSERT_TRUE(x.ok() && y.ok());
  auto z = zipRemainder(h, *x, *y);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.error().message, "remainder by zero: 15554 % 0");
}

template <class H>
void reduceReturnsUnderflow(H& h) {
  auto x = buildWithZeroAt(h, kFaultSize, kFaultAt);  // one element is 0.0: the poison
  ASSERT_TRUE(x.ok());
  auto r = reduceUnderflowingAt(h, *x, 0.0);
  ASSERT_FALSE(r.ok()) << "folded to " << *r;
  EXPECT_EQ(r.error().message, "integer overflow: -9223372036854775808 - 1");
}

// Under strictly, an operation's fault propagated with OSPREY_TRY ends the work there.
template <class H>
Result<Scalar> modelWithAFaultingStep(H& h, int& stepsRun) {
  auto a = OSPREY_TRY(buildDoubling(h, 100));
  ++stepsRun;
  auto b = OSPREY_TRY(buildDividingByZeroAt(h, 100, 42));
  ++stepsRun;  // must never run
  auto c = OSPREY_TRY(buildDoubling(h, 100));
  ++stepsRun;
  return h.get(a, 1) + h.get(b, 1) + h.get(c, 1);
}

template <class H>
void strictlyStopsTheModelAtAKernelFault(H& h) {
  int stepsRun = 0;
  auto r = strictly([&] { return modelWithAFaultingStep(h, stepsRun); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "division by zero: 1000 / 0");
  EXPECT_EQ(stepsRun, 1);
}

// Index maths on the host between operations faults the same way and stops the work.
template <class H>
void strictlyStopsTheModelAtAHostFault(H& h) {
  int launches = 0;
  auto r = strictly([&]() -> Result<Scalar> {
    auto a = OSPREY_TRY(buildDoubling(h, 8));
    ++launches;
    const Int rows = std::numeric_limits<Index>::max() / 2 + 1;
    const Int elements = rows * Int(2);  // faults: the shape does not fit an int64
    auto b = OSPREY_TRY(buildDoubling(h, elements.raw()));
    ++launches;
    return h.get(a, 0) + h.get(b, 0);
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "integer overflow: 4611686018427387904 * 2");
  EXPECT_EQ(launches, 1);
}

}  // namespace osprey::testing::strict_cases
