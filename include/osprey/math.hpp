// The shared-source maths: every transcendental the model and its backward use (DESIGN.md §4).
//
// Platform libms (glibc, CUDA's libdevice) differ in the last bits, so model code never calls
// std::exp and friends. These functions are header-only OSPREY_FN code in plain double arithmetic
// (range reduction + polynomial, no tables), compiled from this one source for the host
// and for the device, hence bit-identical on every handler. Accuracy is checked against x87 long
// double on millions of arguments in tests/math/math_accuracy_test.cpp (all within 1 ulp).
//
//   exp(x)      e^x                 exp.hpp
//   log(x)      ln x                log.hpp
//   tanh(x)     hyperbolic tangent  tanh.hpp
//   sqrt(x)     IEEE square root    sqrt.hpp   (correctly rounded everywhere already)
//   fma(a,b,c)  a*b + c, one rounding  fma.hpp (correctly rounded everywhere already)
//   powi(x, n)  x^n, integer n      powi.hpp   (fixed product order)
//   DivideBy(d) x / d for a fixed d divide.hpp (a multiply where that is the same double)
#pragma once

#include "osprey/math/divide.hpp"
#include "osprey/math/exp.hpp"
#include "osprey/math/fma.hpp"
#include "osprey/math/log.hpp"
#include "osprey/math/powi.hpp"
#include "osprey/math/sqrt.hpp"
#include "osprey/math/tanh.hpp"
