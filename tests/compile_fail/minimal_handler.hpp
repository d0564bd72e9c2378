// A minimal complete handler for the compile-fail cases: every operation forwards to lists.
// Each case copies this shape and breaks exactly one thing (its positive twin leaves it intact).
#pragma once

#include <span>
#include <string>

#include "osprey/lists/lists.hpp"

namespace osprey::compile_fail {

// The operations every case keeps, placed first in the class; a case adds the ones it tests
// (zipWith, reduce, indexOf).
#define OSPREY_MINIMAL_HANDLER_COMMON_OPS                                                        \
  using Buffer = ::osprey::Lists::Buffer;                                                     \
  template <::osprey::Kernel K>                                                               \
  ::osprey::Result<Buffer> build(::osprey::Index n, K kernel) {                               \
    return m_lists.build(n, kernel);                                                          \
  }                                                                                           \
  ::osprey::Scalar get(const Buffer& b, ::osprey::Index i) { return m_lists.get(b, i); }      \
  ::osprey::Index length(const Buffer& b) { return m_lists.length(b); }                       \
  ::osprey::Result<Buffer> matMul(const Buffer& a, const Buffer& b, ::osprey::Index rows,     \
                                  ::osprey::Index inner, ::osprey::Index cols) {              \
    return m_lists.matMul(a, b, rows, inner, cols);                                           \
  }                                                                                           \
  ::osprey::Result<Buffer> fromList(std::span<const ::osprey::Scalar> xs) {                   \
    return m_lists.fromList(xs);                                                              \
  }                                                                                           \
  ::osprey::Result<Buffer> load(const std::string& path, const std::string& name) {           \
    return m_lists.load(path, name);                                                          \
  }                                                                                           \
  std::string device() const { return "minimal"; }                                            \
                                                                                              \
 private:                                                                                     \
  ::osprey::Lists m_lists;                                                                    \
                                                                                              \
 public:                                                                                      \
  static_assert(true)

}  // namespace osprey::compile_fail
