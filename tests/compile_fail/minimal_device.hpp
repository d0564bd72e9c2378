// A minimal complete device runtime for the compile-fail cases: plain sequential loops on host
// memory. Each case copies this shape and leaves out exactly one member (its positive twin keeps
// it), so the compiler must name that member, or the DeviceRuntime concept it belongs to.
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include "osprey/gpu/device_runtime.hpp"

namespace osprey::compile_fail {

// The members every case keeps, placed first in the class of device D; a case adds the ones it
// tests (fold, indexOf).
#define OSPREY_MINIMAL_DEVICE_COMMON_MEMBERS(D)                                                   \
  static ::osprey::Result<std::shared_ptr<D>> open() { return std::make_shared<D>(); }           \
  std::string name() const { return "minimal"; }                                                 \
  ::osprey::Result<::osprey::Scalar*> allocate(::osprey::Index n) {                              \
    return new ::osprey::Scalar[static_cast<std::size_t>(n)];                                    \
  }                                                                                              \
  void release(::osprey::Scalar* p) { delete[] p; }                                              \
  ::osprey::Result<void> upload(::osprey::Scalar* dst, const ::osprey::Scalar* src,              \
                                ::osprey::Index n) {                                             \
    std::copy_n(src, n, dst);                                                                    \
    return {};                                                                                   \
  }                                                                                              \
  ::osprey::Result<void> download(::osprey::Scalar* dst, const ::osprey::Scalar* src,            \
                                  ::osprey::Index n) {                                           \
    return upload(dst, src, n);                                                                  \
  }                                                                                              \
  ::osprey::Result<::osprey::Scalar> readOne(const ::osprey::Scalar* p) { return *p; }           \
  template <class Body>                                                                          \
  ::osprey::Result<void> forEach(::osprey::Index n, const Body& body) {                          \
    for (::osprey::Index i = 0; i < n; ++i) body(i);                                             \
    return {};                                                                                   \
  }                                                                                              \
  ::osprey::Result<void> matMul(::osprey::Scalar* out, ::osprey::View a, ::osprey::View b,       \
                                ::osprey::Index rows, ::osprey::Index inner, ::osprey::Index cols) { \
    for (::osprey::Index r = 0; r < rows; ++r)                                                   \
      for (::osprey::Index c = 0; c < cols; ++c) {                                               \
        ::osprey::Scalar acc = 0.0;                                                              \
        for (::osprey::Index k = 0; k < inner; ++k)                                              \
          acc = __builtin_fma(a[r * inner + k], b[k * cols + c], acc);                           \
        out[r * cols + c] = acc;                                                                 \
      }                                                                                          \
    return {};                                                                                   \
  }                                                                                              \
  static_assert(true)

// The members a case may leave out.
#define OSPREY_MINIMAL_DEVICE_FOLD                                                               \
  template <class C>                                                                             \
  ::osprey::Result<::osprey::Scalar> fold(::osprey::View v, ::osprey::Scalar seed, C combine) {  \
    for (::osprey::Index i = 0; i < v.n; ++i) seed = combine(seed, v[i]);                        \
    return seed;                                                                                 \
  }                                                                                              \
  static_assert(true)
#define OSPREY_MINIMAL_DEVICE_INDEX_OF                                                           \
  ::osprey::Result<::osprey::Index> indexOf(::osprey::View v, ::osprey::Scalar x) {              \
    for (::osprey::Index i = 0; i < v.n; ++i)                                                    \
      if (v[i] == x) return i;                                                                   \
    return v.n;                                                                                  \
  }                                                                                              \
  static_assert(true)

}  // namespace osprey::compile_fail
