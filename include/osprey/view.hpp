// View: the cheap, trivially-copyable window onto a buffer that kernels capture.
//
// A kernel never holds an owning handle (DESIGN.md §2): it captures Views by value. A View is a
// pointer and a length (ViewOf<T> for elements stored as T; View for doubles); the pointer is host memory for lists and gpu/host, device memory for
// gpu/cuda, and the element read compiles for both. Reads are unchecked (they sit in the hottest
// loops); the index arithmetic that produces them is checked by `Int`.
#pragma once

#include <concepts>
#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/strict.hpp"

namespace osprey {

// A window onto elements stored as T: double for the exact handlers, a narrower type for a handler
// that stores less. Every element reads as a Scalar, so a kernel written against one view type
// compiles against all of them; for T = Scalar the read is the element itself.
template <class T>
struct ViewOf {
  const T* data = nullptr;
  Index n = 0;

  OSPREY_FN Scalar operator[](Index i) const { return static_cast<Scalar>(data[i]); }
  OSPREY_FN Scalar operator[](Int i) const { return static_cast<Scalar>(data[i.raw()]); }
  // A traced index (osprey/trace/values.hpp) records a read instead: found by argument-dependent
  // lookup, so this header needs no tracer.
  template <class I>
    requires requires(const T* d, Index n, I i) { loadTraced(d, n, i); }
  auto operator[](I i) const {
    return loadTraced(data, n, i);
  }
  OSPREY_FN Index size() const { return n; }
};

// The exact handlers' view: doubles.
using View = ViewOf<Scalar>;

// What a kernel may capture to read a buffer: trivially copyable, every element read as a Scalar.
template <class V>
concept ReadView = std::is_trivially_copyable_v<V> && requires(const V& v, Index i, Int j) {
  { v[i] } -> std::same_as<Scalar>;
  { v[j] } -> std::same_as<Scalar>;
  { v.size() } -> std::same_as<Index>;
};

static_assert(ReadView<View>, "a View must be capturable by a kernel");

}  // namespace osprey
