// DeviceRuntime<D>: what a device runtime must provide for the gpu handler Gpu<D> (handler.hpp),
// its buffers (buffer.hpp) and the GPU surface (surface.hpp). A new device is told by the compiler
// what it lacks, member by member, as a handler is by OSPREY_ASSERT_HANDLER: each member is its own
// concept below, and OSPREY_ASSERT_DEVICE, placed after every device, asserts each one by name.
//
//   member                                  returns                  meaning
//   static open()                           Result<shared_ptr<D>>    the device, or why it cannot be had
//   name() const                            std::string              "host", "cuda: NVIDIA H200"
//   allocate(n)                             Result<Scalar*>          n elements of device memory
//     (storage E other than Scalar: allocate<E>(n) -> Result<E*>)
//   release(p)                                                       gives a block back
//   upload(dst, src, n) / download(...)     Result<void>             host <-> device copies
//   readOne(p)                              Result<Scalar>           one element read back
//   forEach(n, body)                        Result<void>             body(i) for every i, in parallel
//   fold(view, seed, combine)               Result<Scalar>           left fold in element order
//   indexOf(view, x)                        Result<Index>            smallest matching index, else n
//   matMul(out, a, b, rows, inner, cols)    Result<void>             exact product, k order from 0.0
//
// Members a device may add where it has them (matMulBatched, matMulTransposed, copyBlocks,
// foldRows) are not part of the contract: Gpu<D> offers them only where they exist, and the
// reference runs elsewhere.
#pragma once

#include <concepts>
#include <memory>
#include <string>

#include "osprey/config.hpp"
#include "osprey/effect.hpp"
#include "osprey/result.hpp"
#include "osprey/view.hpp"

namespace osprey {

namespace archetype {
// Stands for any body forEach is given (build's BuildBody, a handler's own): body(i) for an index.
struct Body {
  OSPREY_FN void operator()(Index) const {}
};
}  // namespace archetype

namespace device {

// How a runtime is had: the handler never constructs one, it is given what open() returned.
template <class D>
concept Open = requires {
  { D::open() } -> std::same_as<Result<std::shared_ptr<D>>>;
};
template <class D>
concept Name = requires(const D& d) {
  { d.name() } -> std::same_as<std::string>;
};
// The surface asks for doubles as allocate(n), and for any other storage E as allocate<E>(n).
template <class D, class E>
concept Allocate = (std::same_as<E, Scalar> && requires(D& d, Index n) {
                     { d.allocate(n) } -> std::same_as<Result<Scalar*>>;
                   }) || (!std::same_as<E, Scalar> && requires(D& d, Index n) {
                     { d.template allocate<E>(n) } -> std::same_as<Result<E*>>;
                   });
// The one member a buffer itself calls: its memory's deleter.
template <class D, class E>
concept Release = requires(D& d, E* p) { d.release(p); };
template <class D, class E>
concept Copies = requires(D& d, E* dst, const E* src, Index n) {
  { d.upload(dst, src, n) } -> std::same_as<Result<void>>;
  { d.download(dst, src, n) } -> std::same_as<Result<void>>;
};
template <class D, class E>
concept ReadOne = requires(D& d, const E* p) {
  { d.readOne(p) } -> std::same_as<Result<Scalar>>;
};
template <class D>
concept ForEach = requires(D& d, Index n, const archetype::Body& body) {
  { d.forEach(n, body) } -> std::same_as<Result<void>>;
};
template <class D, class E>
concept Fold = requires(D& d, ViewOf<E> v, Scalar seed, archetype::Combine c) {
  { d.fold(v, seed, c) } -> std::same_as<Result<Scalar>>;
};
template <class D, class E>
concept IndexOf = requires(D& d, ViewOf<E> v, Scalar x) {
  { d.indexOf(v, x) } -> std::same_as<Result<Index>>;
};
// The exact product, on doubles whatever a handler stores.
template <class D>
concept MatMul = requires(D& d, Scalar* out, View a, View b, Index n) {
  { d.matMul(out, a, b, n, n, n) } -> std::same_as<Result<void>>;
};

}  // namespace device

// A device holds buffers of storage E: every element-typed member above, at E.
template <class D, class E>
concept DeviceStorage = device::Allocate<D, E> && device::Release<D, E> && device::Copies<D, E> &&
                        device::ReadOne<D, E> && device::Fold<D, E> && device::IndexOf<D, E>;

// A device runtime: the whole contract, for the exact handlers' doubles.
template <class D>
concept DeviceRuntime = device::Open<D> && device::Name<D> && DeviceStorage<D, Scalar> && device::ForEach<D> &&
                        device::MatMul<D>;

}  // namespace osprey

// Placed after every device runtime: one assertion per member, so a missing or mistyped member is
// reported by name, then the concept itself.
#define OSPREY_ASSERT_DEVICE(D, NAME)                                                                           \
  static_assert(::osprey::device::Open<D>,                                                                      \
                NAME " is no DeviceRuntime: static open() missing or mistyped");                                \
  static_assert(::osprey::device::Name<D>,                                                                      \
                NAME " is no DeviceRuntime: name() missing or mistyped");                                       \
  static_assert(::osprey::device::Allocate<D, ::osprey::Scalar>,                                                \
                NAME " is no DeviceRuntime: allocate(n) missing or mistyped");                                  \
  static_assert(::osprey::device::Release<D, ::osprey::Scalar>,                                                 \
                NAME " is no DeviceRuntime: release(p) missing or mistyped");                                   \
  static_assert(::osprey::device::Copies<D, ::osprey::Scalar>,                                                  \
                NAME " is no DeviceRuntime: upload(dst, src, n) or download(dst, src, n) missing or mistyped"); \
  static_assert(::osprey::device::ReadOne<D, ::osprey::Scalar>,                                                 \
                NAME " is no DeviceRuntime: readOne(p) missing or mistyped");                                   \
  static_assert(::osprey::device::ForEach<D>,                                                                   \
                NAME " is no DeviceRuntime: forEach(n, body) missing or mistyped");                             \
  static_assert(::osprey::device::Fold<D, ::osprey::Scalar>,                                                    \
                NAME " is no DeviceRuntime: fold(view, seed, combine) missing or mistyped");                    \
  static_assert(::osprey::device::IndexOf<D, ::osprey::Scalar>,                                                 \
                NAME " is no DeviceRuntime: indexOf(view, x) missing or mistyped");                             \
  static_assert(::osprey::device::MatMul<D>,                                                                    \
                NAME " is no DeviceRuntime: matMul(out, a, b, rows, inner, cols) missing or mistyped");         \
  static_assert(::osprey::DeviceRuntime<D>)
