// What the layer tests share: lifting host vectors onto a handler, unwrapping results, the
// finite-difference gradient, and tolerant comparisons (for checks against host float64 loops;
// cross-handler checks compare bit patterns instead).
#pragma once

#include <cmath>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpt2/layers/layers.hpp"
#include "handlers.hpp"

namespace gpt2::testing {

using osprey::Index;
using osprey::Scalar;
using osprey::testing::randomValues;
using osprey::testing::readAll;

// The value of a Result, or an exception carrying its error (gtest reports it as a failure).
template <class T>
T must(osprey::Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}

template <class H>
Buf<H> lift(H& h, const std::vector<Scalar>& xs) {
  return must(h.fromList(std::span<const Scalar>(xs)));
}

// Token ids in [0, V) held as doubles, deterministic.
inline std::vector<Scalar> randomTokens(std::size_t n, Index V, std::uint64_t seed) {
  auto u = randomValues(n, seed, 0.0, static_cast<Scalar>(V));
  for (auto& x : u) x = std::floor(x);
  return u;
}

// sum_i a[i] * b[i] in index order: the scalar a test differentiates (L = <out, r>).
inline Scalar weightedSum(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  Scalar acc = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) acc += a[i] * b[i];
  return acc;
}

// Central differences of f at x: (f(x + h e_i) - f(x - h e_i)) / 2h for every i.
inline std::vector<Scalar> numericGradient(std::vector<Scalar> x,
                                           const std::function<Scalar(const std::vector<Scalar>&)>& f,
                                           Scalar step = 1e-5) {
  std::vector<Scalar> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Scalar keep = x[i];
    x[i] = keep + step;
    const Scalar up = f(x);
    x[i] = keep - step;
    const Scalar down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2.0 * step);
  }
  return g;
}

// Every element within rtol relative (to the larger magnitude) or atol absolute.
inline void expectClose(const std::vector<Scalar>& actual, const std::vector<Scalar>& expected,
                        Scalar rtol, Scalar atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const Scalar scale = std::max(std::fabs(actual[i]), std::fabs(expected[i]));
    const Scalar err = std::fabs(actual[i] - expected[i]);
    if (!(err <= rtol * scale || err <= atol)) {
      if (++bad <= 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << actual[i] << ", expected " << expected[i]
                      << " (error " << err << ")";
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": elements outside tolerance";
}

// Finite-difference tolerance: central differences with step 1e-5 carry ~1e-10 truncation and
// ~1e-11 rounding error; 1e-6 relative leaves a wide margin while catching any wrong term.
inline constexpr Scalar kGradRtol = 1e-6;
inline constexpr Scalar kGradAtol = 1e-8;
// Against the host float64 loops: the same maths in a (possibly) different order and libm.
inline constexpr Scalar kForwardRtol = 1e-12;
inline constexpr Scalar kForwardAtol = 1e-14;

// An error result whose message contains `needle`.
template <class T>
void expectError(const osprey::Result<T>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "expected an error containing \"" << needle << "\"";
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

}  // namespace gpt2::testing
