// Result<T>: the value of an operation that can fail, or the Error that says why.
//
// The effect's fallible operations (build, zipWith, reduce, indexOf, matMul, fromList, load)
// return Result; the model propagates errors with OSPREY_TRY and never computes on a made-up
// tensor. (std::expected is C++23; nvcc 13 compiles C++20, so Osprey carries its own.)
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace osprey {

// What went wrong, in words a user can act on.
struct Error {
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : m_state(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : m_state(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return m_state.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(m_state); }
  const T& value() const& { return std::get<0>(m_state); }
  T&& value() && { return std::get<0>(std::move(m_state)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(m_state); }

 private:
  std::variant<T, Error> m_state;
};

// Result<void>: success, or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : m_error(std::move(error)), m_failed(true) {}
  bool ok() const { return !m_failed; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return m_error; }

 private:
  Error m_error;
  bool m_failed = false;
};

inline Result<void> success() { return {}; }

// Result<T> -> whether T is a Result (for strictly/under to pass results through unchanged).
template <class T>
struct IsResult : std::false_type {};
template <class T>
struct IsResult<Result<T>> : std::true_type {};

}  // namespace osprey

// OSPREY_TRY(expr): evaluates a Result; on failure returns its Error from the enclosing function,
// otherwise yields the value. (A GNU statement expression: g++, clang++ and nvcc accept it.)
#define OSPREY_TRY(...)                                             \
  ({                                                                \
    auto osprey_try_result_ = (__VA_ARGS__);                        \
    if (!osprey_try_result_.ok()) return osprey_try_result_.error(); \
    std::move(osprey_try_result_).value();                          \
  })

// OSPREY_CHECK(expr): the same for Result<void>.
#define OSPREY_CHECK(...)                                           \
  do {                                                              \
    auto osprey_check_result_ = (__VA_ARGS__);                      \
    if (!osprey_check_result_.ok()) return osprey_check_result_.error(); \
  } while (0)
