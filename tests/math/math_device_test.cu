// The shared-source maths gives the same bits on the device as on the host (DESIGN.md §4).
//
// A million arguments per function (the accuracy test's ranges) go through osprey::math on the
// GPU and on the host; every result must match bit for bit. Needs a CUDA device: skipped without.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "osprey/math.hpp"

namespace {

enum class Fn : int { Exp, Log, Tanh, Sqrt, Powi };

// powi's exponent is taken from the argument's index, so many exponents are exercised.
OSPREY_FN inline std::int64_t powiExponent(std::int64_t i) { return (i % 4001) - 2000; }

OSPREY_FN inline double apply(Fn fn, double x, std::int64_t i) {
  switch (fn) {
    case Fn::Exp:
      return osprey::math::exp(x);
    case Fn::Log:
      return osprey::math::log(x);
    case Fn::Tanh:
      return osprey::math::tanh(x);
    case Fn::Sqrt:
      return osprey::math::sqrt(x);
    case Fn::Powi:
      return osprey::math::powi(x, powiExponent(i));
  }
  return 0.0;
}

__global__ void applyKernel(Fn fn, const double* in, double* out, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = apply(fn, in[i], i);
  }
}

bool haveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

std::vector<double> onDevice(Fn fn, const std::vector<double>& args) {
  const std::size_t bytes = args.size() * sizeof(double);
  double* in = nullptr;
  double* out = nullptr;
  EXPECT_EQ(cudaMalloc(&in, bytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&out, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(in, args.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  const auto n = static_cast<std::int64_t>(args.size());
  const int threads = 256;
  applyKernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads>>>(fn, in, out, n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<double> result(args.size());
  EXPECT_EQ(cudaMemcpy(result.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(in);
  cudaFree(out);
  return result;
}

// Arguments: bulk ranges as in math_accuracy_test.cpp plus the special values.
std::vector<double> arguments(Fn fn) {
  std::mt19937_64 engine(0x6f737072'65790010ULL + static_cast<int>(fn));
  auto unit = [&] { return static_cast<double>(engine() >> 11) * 0x1p-53; };
  auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * unit(); };
  auto logUniform = [&](double lo, double hi) {
    return std::exp(uniform(std::log(lo), std::log(hi)));
  };
  std::vector<double> args = {0.0,    -0.0,      INFINITY,  -INFINITY, NAN,    1.0,
                              -1.0,   0x1p-1074, 0x1p-1022, 709.78,    709.79, -745.0,
                              -745.2, 22.0,      0x1p-27,   1e300,     -1e300};
  for (int i = 0; i < 1'000'000; ++i) {
    switch (fn) {
      case Fn::Exp:
        args.push_back(i % 2 == 0 ? uniform(-745.0, 709.0) : uniform(-50.0, 50.0));
        break;
      case Fn::Log:
        args.push_back(i % 2 == 0 ? logUniform(1e-300, 1e300) : logUniform(0x1p-1074, 1.0));
        break;
      case Fn::Tanh:
        args.push_back(i % 2 == 0 ? uniform(-20.0, 20.0) : uniform(-5.0, 5.0));
        break;
      case Fn::Sqrt:
        args.push_back(logUniform(0x1p-1074, 1e300));
        break;
      case Fn::Powi:
        args.push_back(uniform(0.5, 1.5));
        break;
    }
  }
  return args;
}

std::uint64_t bitsOf(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

void expectBitIdentical(Fn fn, const char* name) {
  if (!haveDevice()) {
    GTEST_SKIP() << "no CUDA device";
  }
  const std::vector<double> args = arguments(fn);
  const std::vector<double> device = onDevice(fn, args);
  std::int64_t mismatches = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const double host = apply(fn, args[i], static_cast<std::int64_t>(i));
    const bool bothNan = std::isnan(host) && std::isnan(device[i]);  // NaN payloads may differ
    if (!bothNan && bitsOf(host) != bitsOf(device[i])) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << name << "(" << args[i] << ") [" << std::hexfloat << args[i] << "]: host "
                      << host << ", device " << device[i];
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << name << ": " << args.size() << " arguments";
}

TEST(MathDevice, ExpBitIdenticalToHost) { expectBitIdentical(Fn::Exp, "exp"); }
TEST(MathDevice, LogBitIdenticalToHost) { expectBitIdentical(Fn::Log, "log"); }
TEST(MathDevice, TanhBitIdenticalToHost) { expectBitIdentical(Fn::Tanh, "tanh"); }
TEST(MathDevice, SqrtBitIdenticalToHost) { expectBitIdentical(Fn::Sqrt, "sqrt"); }
TEST(MathDevice, PowiBitIdenticalToHost) { expectBitIdentical(Fn::Powi, "powi"); }

}  // namespace
