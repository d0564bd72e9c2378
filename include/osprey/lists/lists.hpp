// The lists handler: the plain, sequential, obviously-correct reference over host memory.
//
// Every operation is the loop its definition names, in index order, with no threads, no SIMD
// intrinsics and no fused multiply-add (the library is built with -ffp-contract=off). The other
// handlers are checked bit for bit against this one.
#pragma once

#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "osprey/effect.hpp"
#include "osprey/io/tensor_file.hpp"
#include "osprey/shape_check.hpp"
#include "osprey/strict.hpp"

namespace osprey {

class Lists {
 public:
  // An immutable, shared list of values.
  class Buffer {
   public:
    Buffer() : m_values(std::make_shared<std::vector<Scalar>>()) {}
    explicit Buffer(std::vector<Scalar> values)
        : m_values(std::make_shared<std::vector<Scalar>>(std::move(values))) {}
    View view() const { return View{m_values->data(), static_cast<Index>(m_values->size())}; }
    const std::vector<Scalar>& values() const { return *m_values; }

   private:
    std::shared_ptr<std::vector<Scalar>> m_values;
  };

  template <Kernel K>
  Result<Buffer> build(Index n, K kernel) {
    return buildChecked(n, kernel);
  }

  // build's body, for kernels the caller's concept already checked: zipWith's wrapper holds a
  // checked combine, but under nvcc's host pass an extended lambda's wrapper type is not
  // trivially copyable, so the wrapper itself would not pass Kernel (only the lambda does).
  template <class K>
  Result<Buffer> buildChecked(Index n, K kernel) {
    if (n < 0) return Error{fmt::format("build: negative length {}", n)};
    try {
      std::vector<Scalar> out(static_cast<std::size_t>(n));
      for (Index i = 0; i < n; ++i) out[i] = kernel(i);
      return Buffer(std::move(out));
    } catch (const StrictFault& f) {
      return Error{f.what()};
    } catch (const std::bad_alloc&) {
      return Error{fmt::format("build: out of memory allocating {} doubles", n)};
    }
  }

  Scalar get(const Buffer& b, Index i) {
    if (i < 0 || i >= length(b)) fault(FaultKind::Bounds, i, length(b));
    return b.values()[static_cast<std::size_t>(i)];
  }

  Index length(const Buffer& b) { return static_cast<Index>(b.values().size()); }

  template <Combine C>
  Result<Buffer> zipWith(const Buffer& a, const Buffer& b, C combine) {
    OSPREY_CHECK(checkSameLength("zipWith", length(a), length(b)));
    View x = a.view(), y = b.view();
    return buildChecked(length(a), [x, y, combine](Index i) -> Scalar { return combine(x[i], y[i]); });
  }

  template <Combine C>
  Result<Scalar> reduce(const Buffer& b, Scalar seed, C combine) {
    try {
      Scalar acc = seed;
      for (Scalar x : b.values()) acc = combine(acc, x);
      return acc;
    } catch (const StrictFault& f) {
      return Error{f.what()};
    }
  }

  Result<Index> indexOf(const Buffer& b, Scalar x) {
    const auto& v = b.values();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] == x) return static_cast<Index>(i);
    return length(b);
  }

  Result<Buffer> matMul(const Buffer& a, const Buffer& b, Index rows, Index inner, Index cols) {
    OSPREY_CHECK(checkMatMulShapes(length(a), length(b), rows, inner, cols));
    View x = a.view(), y = b.view();
    // Each output accumulates in k order from 0.0: the contract every handler reproduces.
    return build(rows * cols, [x, y, inner, cols](Index o) -> Scalar {
      Index i = o / cols, j = o % cols;
      Scalar acc = 0.0;
      for (Index k = 0; k < inner; ++k) acc = acc + x[i * inner + k] * y[k * cols + j];
      return acc;
    });
  }

  Result<Buffer> fromList(std::span<const Scalar> xs) {
    return Buffer(std::vector<Scalar>(xs.begin(), xs.end()));
  }

  Result<Buffer> load(const std::string& path, const std::string& name) {
    auto t = OSPREY_TRY(io::readTensor(path, name));
    return Buffer(std::move(t.values));
  }

  std::string device() const { return "lists"; }
};

OSPREY_ASSERT_HANDLER(Lists, "lists");

}  // namespace osprey
