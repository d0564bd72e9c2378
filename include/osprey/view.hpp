// View: the cheap, trivially-copyable window onto a buffer that kernels capture.
//
// A kernel never holds an owning handle (DESIGN.md §2): it captures Views by value. A View is a
// pointer and a length; the pointer is host memory for lists and gpu/host, device memory for
// gpu/cuda, and the element read compiles for both. Reads are unchecked (they sit in the hottest
// loops); the index arithmetic that produces them is checked by `Int`.
#pragma once

#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/strict.hpp"

namespace osprey {

struct View {
  const Scalar* data = nullptr;
  Index n = 0;

  OSPREY_FN Scalar operator[](Index i) const { return data[i]; }
  OSPREY_FN Scalar operator[](Int i) const { return data[i.raw()]; }
  OSPREY_FN Index size() const { return n; }
};

static_assert(std::is_trivially_copyable_v<View>, "a View must be capturable by a kernel");

}  // namespace osprey
