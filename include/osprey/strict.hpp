// Strict integer arithmetic for the model's index maths, and the `strictly` boundary.
//
// `Int` is a checked int64: overflow, division by zero and remainder by zero never wrap and never
// substitute a value. On the host a fault throws StrictFault, which the launching operation (or
// `strictly`) turns into an Error naming the operation and its operands
// ("integer overflow: 9223372036854775807 * 2"). In a device kernel, where nothing can throw, the
// first fault is recorded in the device's fault slot, and the launching operation returns it.
#pragma once

#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace osprey {

enum class FaultKind : int { None = 0, Add, Sub, Mul, Div, Rem, DivByZero, RemByZero, Neg, Bounds };

// The words of a fault, e.g. describeFault(Mul, INT64_MAX, 2) == "integer overflow: 9223372036854775807 * 2".
std::string describeFault(FaultKind kind, Index a, Index b);

// Thrown by host code that faults; `strictly` and every effect operation turn it into an Error.
class StrictFault : public std::exception {
 public:
  StrictFault(FaultKind kind, Index a, Index b)
      : m_kind(kind), m_a(a), m_b(b), m_message(describeFault(kind, a, b)) {}
  const char* what() const noexcept override { return m_message.c_str(); }
  FaultKind kind() const { return m_kind; }
  Index lhs() const { return m_a; }
  Index rhs() const { return m_b; }

 private:
  FaultKind m_kind;
  Index m_a, m_b;
  std::string m_message;
};

// A device operation that failed where no Result can be returned (a read-back in get()).
class DeviceFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Host side of a fault: never returns.
[[noreturn]] void raiseFault(FaultKind kind, Index a, Index b);

#if defined(__CUDACC__)
// The device's fault slot: the first fault of a launch wins. Each translation unit has its own
// copy (whole-program compilation); the cuda runtime launches and reads it from the same unit.
struct DeviceFault {
  int kind;
  long long a, b;
};
static __device__ DeviceFault osprey_device_fault;
__device__ inline void recordDeviceFault(FaultKind kind, Index a, Index b) {
  if (atomicCAS(&osprey_device_fault.kind, 0, static_cast<int>(kind)) == 0) {
    osprey_device_fault.a = a;
    osprey_device_fault.b = b;
    __threadfence();
  }
}
#endif

// A fault from code that runs on the host or the device.
OSPREY_INLINE void fault(FaultKind kind, Index a, Index b) {
#if OSPREY_DEVICE_PASS
  recordDeviceFault(kind, a, b);
#else
  raiseFault(kind, a, b);
#endif
}

namespace checked {
// The limits as constants: to nvcc, std::numeric_limits' members are host-only functions, which a
// device kernel may not call (the build turns that warning into an error).
inline constexpr Index kIndexMax = INT64_MAX;
inline constexpr Index kIndexMin = INT64_MIN;

OSPREY_INLINE Index add(Index a, Index b) {
#if OSPREY_DEVICE_PASS
  // The wrapped sum overflowed exactly when a and b share a sign that the sum does not (a few
  // instructions; a 128-bit sum and its range test are a dozen).
  const Index r = static_cast<Index>(static_cast<unsigned long long>(a) + static_cast<unsigned long long>(b));
  if (((a ^ r) & (b ^ r)) < 0) {
    fault(FaultKind::Add, a, b);
    return 0;
  }
  return r;
#else
  Index r;
  if (__builtin_add_overflow(a, b, &r)) fault(FaultKind::Add, a, b);
  return r;
#endif
}
OSPREY_INLINE Index sub(Index a, Index b) {
#if OSPREY_DEVICE_PASS
  // The wrapped difference overflowed exactly when a and b differ in sign and it differs from a's.
  const Index r = static_cast<Index>(static_cast<unsigned long long>(a) - static_cast<unsigned long long>(b));
  if (((a ^ b) & (a ^ r)) < 0) {
    fault(FaultKind::Sub, a, b);
    return 0;
  }
  return r;
#else
  Index r;
  if (__builtin_sub_overflow(a, b, &r)) fault(FaultKind::Sub, a, b);
  return r;
#endif
}
// In a kernel, 64-bit multiplication and division are sequences of 32-bit instructions (a
// division dozens of them), and index maths runs once per element: operands that fit 32 bits,
// as nearly all indices do, take the one-instruction forms below. The results are the same
// integers; only the cost differs.
OSPREY_INLINE bool fitsInt32(Index v) { return static_cast<Index>(static_cast<int>(v)) == v; }  // high word = sign of low
OSPREY_INLINE bool fitsUint32(Index v) { return (static_cast<unsigned long long>(v) >> 32) == 0; }  // high word zero

OSPREY_INLINE Index mul(Index a, Index b) {
#if OSPREY_DEVICE_PASS
  if (fitsInt32(a) && fitsInt32(b))  // |a·b| <= 2^62: no overflow
    return static_cast<Index>(static_cast<int>(a)) * static_cast<int>(b);
  __int128 r = static_cast<__int128>(a) * b;
  if (r > kIndexMax || r < kIndexMin) {
    fault(FaultKind::Mul, a, b);
    return 0;
  }
  return static_cast<Index>(r);
#else
  Index r;
  if (__builtin_mul_overflow(a, b, &r)) fault(FaultKind::Mul, a, b);
  return r;
#endif
}
OSPREY_INLINE Index div(Index a, Index b) {
  if (b == 0) {
    fault(FaultKind::DivByZero, a, b);
    return 0;
  }
  if (a == kIndexMin && b == -1) {
    fault(FaultKind::Div, a, b);
    return 0;
  }
#if OSPREY_DEVICE_PASS
  if (fitsUint32(a) && fitsUint32(b)) return static_cast<unsigned>(a) / static_cast<unsigned>(b);
#endif
  return a / b;
}
OSPREY_INLINE Index rem(Index a, Index b) {
  if (b == 0) {
    fault(FaultKind::RemByZero, a, b);
    return 0;
  }
  if (b == -1) return 0;  // INT64_MIN % -1 traps on x86; the true remainder is 0
#if OSPREY_DEVICE_PASS
  if (fitsUint32(a) && fitsUint32(b)) return static_cast<unsigned>(a) % static_cast<unsigned>(b);
#endif
  return a % b;
}
}  // namespace checked

// A checked int64 for index arithmetic. Construct from any integer; read back with raw().
class Int {
 public:
  OSPREY_FN constexpr Int() : m_v(0) {}
  OSPREY_FN constexpr Int(Index v) : m_v(v) {}
  OSPREY_FN constexpr Int(int v) : m_v(v) {}
  OSPREY_FN constexpr Index raw() const { return m_v; }

  OSPREY_FN friend Int operator+(Int a, Int b) { return checked::add(a.m_v, b.m_v); }
  OSPREY_FN friend Int operator-(Int a, Int b) { return checked::sub(a.m_v, b.m_v); }
  OSPREY_FN friend Int operator*(Int a, Int b) { return checked::mul(a.m_v, b.m_v); }
  OSPREY_FN friend Int operator/(Int a, Int b) { return checked::div(a.m_v, b.m_v); }
  OSPREY_FN friend Int operator%(Int a, Int b) { return checked::rem(a.m_v, b.m_v); }
  OSPREY_FN Int operator-() const { return checked::sub(0, m_v); }
  OSPREY_FN Int& operator+=(Int b) { return *this = *this + b; }
  OSPREY_FN Int& operator-=(Int b) { return *this = *this - b; }
  OSPREY_FN Int& operator*=(Int b) { return *this = *this * b; }
  OSPREY_FN Int& operator++() { return *this = *this + 1; }

  OSPREY_FN friend bool operator==(Int a, Int b) { return a.m_v == b.m_v; }
  OSPREY_FN friend bool operator!=(Int a, Int b) { return a.m_v != b.m_v; }
  OSPREY_FN friend bool operator<(Int a, Int b) { return a.m_v < b.m_v; }
  OSPREY_FN friend bool operator<=(Int a, Int b) { return a.m_v <= b.m_v; }
  OSPREY_FN friend bool operator>(Int a, Int b) { return a.m_v > b.m_v; }
  OSPREY_FN friend bool operator>=(Int a, Int b) { return a.m_v >= b.m_v; }

 private:
  Index m_v;
};

// strictly(work): runs work() under the strict arithmetic policy. A fault anywhere in it (host
// code or a kernel) halts the run: nothing after the fault executes, and the result is an Error
// naming the operation and operands. work may return a value, a Result<T>, or nothing.
template <class Work>
auto strictly(Work&& work) {
  using R = decltype(std::forward<Work>(work)());
  if constexpr (IsResult<R>::value) {
    try {
      return std::forward<Work>(work)();
    } catch (const StrictFault& f) {
      return R(Error{f.what()});
    } catch (const DeviceFailure& f) {
      return R(Error{f.what()});
    }
  } else if constexpr (std::is_void_v<R>) {
    try {
      std::forward<Work>(work)();
      return Result<void>();
    } catch (const StrictFault& f) {
      return Result<void>(Error{f.what()});
    } catch (const DeviceFailure& f) {
      return Result<void>(Error{f.what()});
    }
  } else {
    try {
      return Result<R>(std::forward<Work>(work)());
    } catch (const StrictFault& f) {
      return Result<R>(Error{f.what()});
    } catch (const DeviceFailure& f) {
      return Result<R>(Error{f.what()});
    }
  }
}

}  // namespace osprey
