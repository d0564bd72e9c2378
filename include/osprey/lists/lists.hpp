// The lists handler: the plain, sequential, obviously-correct reference over host memory.
//
// Every operation is the loop its definition names, in index order, with no threads and no SIMD
// intrinsics. The only fused multiply-adds are the ones the contract writes, one std::fma per term
// of a product (the library is built with -ffp-contract=off, so the compiler fuses nothing else).
// The other handlers are checked bit for bit against this one.
//
// ListsOf<T> stores its elements as T and computes as Scalar: every kernel and combine still
// sees doubles, and each stored result is rounded to T once. Lists (T = double) is the reference;
// ListsOf<float> is a storage double for tests: the model written once compiles and runs on views
// of narrower storage, the way a fast handler's float or bfloat16 buffers will be read.
#pragma once

#include <cmath>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "osprey/effect.hpp"
#include "osprey/io/tensor_file.hpp"
#include "osprey/shape_check.hpp"
#include "osprey/strict.hpp"

namespace osprey {

template <class T>
class ListsOf {
 public:
  // An immutable, shared list of values.
  class Buffer {
   public:
    Buffer() : m_values(std::make_shared<std::vector<T>>()) {}
    explicit Buffer(std::vector<T> values) : m_values(std::make_shared<std::vector<T>>(std::move(values))) {}
    ViewOf<T> view() const { return ViewOf<T>{m_values->data(), static_cast<Index>(m_values->size())}; }
    const std::vector<T>& values() const { return *m_values; }

   private:
    std::shared_ptr<std::vector<T>> m_values;
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
      std::vector<T> out(static_cast<std::size_t>(n));
      for (Index i = 0; i < n; ++i) out[i] = static_cast<T>(kernel(i));
      return Buffer(std::move(out));
    } catch (const StrictFault& f) {
      return Error{f.what()};
    } catch (const std::bad_alloc&) {
      return Error{fmt::format("build: out of memory allocating {} elements", n)};
    }
  }

  Scalar get(const Buffer& b, Index i) {
    if (i < 0 || i >= length(b)) fault(FaultKind::Bounds, i, length(b));
    return static_cast<Scalar>(b.values()[static_cast<std::size_t>(i)]);
  }

  Index length(const Buffer& b) { return static_cast<Index>(b.values().size()); }

  template <Combine C>
  Result<Buffer> zipWith(const Buffer& a, const Buffer& b, C combine) {
    OSPREY_CHECK(checkSameLength("zipWith", length(a), length(b)));
    const ViewOf<T> x = a.view(), y = b.view();
    return buildChecked(length(a), [x, y, combine](Index i) -> Scalar { return combine(x[i], y[i]); });
  }

  template <Combine C>
  Result<Scalar> reduce(const Buffer& b, Scalar seed, C combine) {
    try {
      Scalar acc = seed;
      for (T x : b.values()) acc = combine(acc, static_cast<Scalar>(x));
      return acc;
    } catch (const StrictFault& f) {
      return Error{f.what()};
    }
  }

  Result<Index> indexOf(const Buffer& b, Scalar x) {
    const auto& v = b.values();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (static_cast<Scalar>(v[i]) == x) return static_cast<Index>(i);
    return length(b);
  }

  Result<Buffer> matMul(const Buffer& a, const Buffer& b, Index rows, Index inner, Index cols) {
    OSPREY_CHECK(checkMatMulShapes(length(a), length(b), rows, inner, cols));
    const ViewOf<T> x = a.view(), y = b.view();
    // Each output is a chain of fused multiply-adds in k order from +0.0: the contract every
    // handler reproduces (DESIGN.md §4).
    return build(rows * cols, [x, y, inner, cols](Index o) -> Scalar {
      Index i = o / cols, j = o % cols;
      Scalar acc = 0.0;
      for (Index k = 0; k < inner; ++k) acc = std::fma(x[i * inner + k], y[k * cols + j], acc);
      return acc;
    });
  }

  Result<Buffer> fromList(std::span<const Scalar> xs) { return Buffer(stored(xs)); }

  Result<Buffer> load(const std::string& path, const std::string& name) {
    auto t = OSPREY_TRY(io::readTensor(path, name));
    if constexpr (std::is_same_v<T, Scalar>) {
      return Buffer(std::move(t.values));
    } else {
      return Buffer(stored(t.values));
    }
  }

  std::string device() const {
    if constexpr (std::is_same_v<T, Scalar>) {
      return "lists";
    } else {
      return fmt::format("lists ({}-byte storage)", sizeof(T));
    }
  }

 private:
  // Host values, each rounded once to the storage type.
  static std::vector<T> stored(std::span<const Scalar> xs) {
    std::vector<T> out(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) out[i] = static_cast<T>(xs[i]);
    return out;
  }
};

// The reference handler: doubles.
using Lists = ListsOf<Scalar>;

OSPREY_ASSERT_HANDLER(Lists, "lists");
OSPREY_ASSERT_HANDLER(ListsOf<float>, "lists (float storage)");

}  // namespace osprey
