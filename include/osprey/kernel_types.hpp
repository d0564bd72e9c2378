// What a kernel computes with: a handler's KernelIndex and KernelScalar, and the few generic
// operations that let one kernel source serve every handler.
//
// Handlers that call kernels directly (lists, host, cuda) compute with osprey::Index and Scalar.
// A handler whose device takes kernels as source text (opencl) traces them instead, with
// trace::Idx and trace::Num (osprey/trace/values.hpp), and says so with member types
// KernelIndex/KernelScalar. A kernel written once for every handler takes KernelIndex<H>:
//
//   using I = osprey::KernelIndex<H>;
//   h.build(n, [=] OSPREY_FN(I i) -> osprey::KernelScalar<H> { return xv[i] * 2.0; });
//
// (nvcc does not allow generic `auto` parameters in __host__ __device__ lambdas, so the type is
// named.) Inside, the operations that a C++ built-in would spell differently for traced values
// have generic forms here: select(c, a, b) and when(c, then, otherwise) for `c ? a : b` and
// if/else, toScalar(i) and toIndex(x) for static_cast, asInt(i) for osprey::Int(i).
#pragma once

#include <type_traits>
#include <utility>

#include "osprey/config.hpp"
#include "osprey/strict.hpp"

namespace osprey {

template <class H>
struct KernelTypes {
  using Index = osprey::Index;
  using Scalar = osprey::Scalar;
};
template <class H>
  requires requires {
    typename H::KernelIndex;
    typename H::KernelScalar;
  }
struct KernelTypes<H> {
  using Index = typename H::KernelIndex;
  using Scalar = typename H::KernelScalar;
};

// The index and scalar types kernels for handler H take and return.
template <class H>
using KernelIndex = typename KernelTypes<H>::Index;
template <class H>
using KernelScalar = typename KernelTypes<H>::Scalar;

// Whether T is a traced value (osprey/trace/values.hpp).
template <class T>
concept TracedValue = requires { typename std::remove_cvref_t<T>::osprey_traced; };

// c ? a : b. For traced values both are recorded and the device selects; for plain values it is
// the conditional itself (only the chosen side is evaluated).
template <class C, class A, class B>
OSPREY_INLINE auto select(C c, A a, B b) {
  if constexpr (TracedValue<C> || TracedValue<A> || TracedValue<B>) {
    return selectTraced(c, a, b);
  } else {
    return c ? a : b;
  }
}

// then() if c, else otherwise(): only the chosen side is evaluated, on every handler (a traced
// kernel records both, the device runs one). For a side that would read out of range or fault
// were it evaluated when not chosen; select() suits values that are cheap and safe either way.
template <class C, class Then, class Else>
OSPREY_INLINE auto when(C c, Then then, Else otherwise) {
  if constexpr (TracedValue<C>) {
    return whenTraced(c, then, otherwise);
  } else {
    using R = decltype(true ? then() : otherwise());
    if (c) return static_cast<R>(then());
    return static_cast<R>(otherwise());
  }
}

// An index as a double (exact below 2^53, rounded to nearest beyond, as static_cast).
template <class I>
OSPREY_INLINE auto toScalar(I i) {
  if constexpr (TracedValue<I>) {
    return toScalarTraced(i);
  } else if constexpr (std::is_same_v<I, Int>) {
    return static_cast<Scalar>(i.raw());
  } else {
    return static_cast<Scalar>(i);
  }
}

// A double truncated to an index, as static_cast<Index> (which it must fit).
template <class S>
OSPREY_INLINE auto toIndex(S x) {
  if constexpr (TracedValue<S>) {
    return toIndexTraced(x);
  } else {
    return static_cast<Index>(x);
  }
}

// The checked index type that goes with scalar type S: Int beside a double, the traced index
// beside a traced double (IntFor<S>(v) makes one from a plain integer).
template <class S>
using IntFor = std::conditional_t<TracedValue<S>, decltype(toIndex(std::declval<S>())), Int>;

// The strict fault of `kind` with operands a and b where c holds (osprey::fault).
template <class C, class A, class B>
OSPREY_INLINE void faultIf(C c, FaultKind kind, A a, B b) {
  if constexpr (TracedValue<C>) {
    faultIfTraced(c, kind, a, b);
  } else {
    if (c) fault(kind, a, b);
  }
}

// acc = body(k, acc) for k = from, from + 1, ..., to - 1 (an osprey::Int counter), from seed: a
// plain loop, or one loop of a traced kernel where the seed, a bound or the body is traced.
template <class A, class F, class T, class Body>
OSPREY_INLINE auto foldRange(A seed, F from, T to, Body body) {
  if constexpr (TracedValue<A> || TracedValue<F> || TracedValue<T> ||
                TracedValue<decltype(body(Int(0), seed))>) {
    return loopTraced(seed, from, to, body);
  } else {
    A acc = seed;
    for (Int k = from; k < to; ++k) acc = body(k, acc);
    return acc;
  }
}

// acc = body(k, acc) for k = from, step(k), step(step(k)), ... while k < to (a chain through a
// table, such as the rows holding one token), from seed.
template <class A, class F, class T, class Body, class Step>
OSPREY_INLINE auto walkChain(A seed, F from, T to, Body body, Step step) {
  if constexpr (TracedValue<A> || TracedValue<F> || TracedValue<T>) {
    return walkTraced(seed, from, to, body, step);
  } else {
    A acc = seed;
    for (auto k = from; k < to; k = step(k)) acc = body(k, acc);
    return acc;
  }
}

// The first k in [from, to) where found(k), as a double, else notFound.
template <class F, class T, class S, class Found>
OSPREY_INLINE auto firstWhere(F from, T to, S notFound, Found found) {
  if constexpr (TracedValue<F> || TracedValue<T> || TracedValue<S>) {
    // Every k is tested (a traced loop has no early exit); the first hit is kept.
    return loopTraced(notFound, from, to, [&](auto k, auto hit) {
      return select(hit == notFound && found(k), toScalar(k), hit);
    });
  } else {
    for (Int k = from; k < to; ++k)
      if (found(k)) return static_cast<S>(toScalar(k));
    return notFound;
  }
}

// An index for checked arithmetic: osprey::Int for a plain integer, itself when traced (a traced
// index is checked on the device).
template <class I>
OSPREY_INLINE auto asInt(I i) {
  if constexpr (TracedValue<I>) {
    return i;
  } else {
    return Int(i);
  }
}

}  // namespace osprey
