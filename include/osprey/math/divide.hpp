// osprey::math::DivideBy — x / d for one divisor d fixed ahead of many divisions.
//
// A double division is a long instruction sequence on a GPU. When d is a power of two whose
// reciprocal is a normal double, x / d and x * (1 / d) are the correctly rounded values of the
// same real number x·2^-k (1 / d is then exact), so they are the same double for every x: zeros
// and their signs, subnormal results, infinities and NaN included. Only then is the product
// taken; any other divisor divides. (GPT-2's attention scale sqrt(64) = 8 is such a divisor.)
#pragma once

#include <cmath>

#include "osprey/config.hpp"
#include "osprey/kernel_types.hpp"

namespace osprey::math {

class DivideBy {
 public:
  explicit DivideBy(double d) : m_d(d), m_inv(1.0 / d), m_multiply(exactReciprocal(d)) {}
  OSPREY_FN double operator()(double x) const { return m_multiply ? x * m_inv : x / m_d; }
  // The same on a traced double (osprey/trace/): the choice is this divisor's, made while tracing.
  template <class S>
    requires TracedValue<S>
  S operator()(S x) const {
    return m_multiply ? x * m_inv : x / m_d;
  }
  // Whether x / d is taken as x * (1 / d) (for tests).
  bool multiplies() const { return m_multiply; }

 private:
  static bool exactReciprocal(double d) {
    if (!std::isfinite(d) || d == 0.0) return false;
    int e = 0;
    if (std::frexp(d, &e) != (d < 0 ? -0.5 : 0.5)) return false;  // not ± a power of two
    return std::isnormal(1.0 / d);
  }
  double m_d, m_inv;
  bool m_multiply;
};

}  // namespace osprey::math
