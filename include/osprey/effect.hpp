// The Tensor effect: the operation set GPT-2 is written against (DESIGN.md §2).
//
// A handler H is a type that answers the ten operations below; the model is a template over H and
// is specialised once per handler. Each operation is its own concept so that a handler missing
// one (or answering it with the wrong type) fails a static_assert that names the operation:
//
//   op                               returns            meaning
//   build(n, kernel)                 Result<Buffer>     element i = kernel(i)
//   get(b, i)                        Scalar             element i (a read-back on a device)
//   length(b)                        Index              element count
//   zipWith(a, b, combine)           Result<Buffer>     combine(a[i], b[i])
//   reduce(b, seed, combine)         Result<Scalar>     left fold in element order
//   indexOf(b, x)                    Result<Index>      smallest i with b[i] == x, else length(b)
//   matMul(a, b, rows, inner, cols)  Result<Buffer>     row-major product, k order from 0.0
//   fromList(span)                   Result<Buffer>     lift host values
//   load(path, name)                 Result<Buffer>     one named tensor from a checkpoint
//   device()                         std::string        who answers: "lists", "host", "cuda: …"
//
// Buffers are cheap shared handles; `b.view()` gives the view a kernel captures (view.hpp: a
// ReadView, View for the exact handlers' doubles).
#pragma once

#include <concepts>
#include <span>
#include <string>
#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/kernel_types.hpp"
#include "osprey/result.hpp"
#include "osprey/view.hpp"

namespace osprey {

// A closure may enter a kernel only if copying it copies plain bytes: no owning captures
// (vectors, strings, shared handles). nvcc's extended lambdas are accepted by their trait.
template <class F>
concept Closure = std::is_trivially_copyable_v<F> || OSPREY_IS_HD_LAMBDA(F);

// kernel(i) -> Scalar, for build; a handler that traces its kernels asks for kernel(I) -> S with
// its own KernelIndex I and KernelScalar S (kernel_types.hpp).
template <class F, class I = Index, class S = Scalar>
concept Kernel = Closure<F> && std::invocable<const F&, I> && std::convertible_to<std::invoke_result_t<const F&, I>, S>;

// combine(x, y) -> Scalar, for zipWith and reduce (S: the handler's KernelScalar).
template <class F, class S = Scalar>
concept Combine = Closure<F> && std::invocable<const F&, S, S> && std::convertible_to<std::invoke_result_t<const F&, S, S>, S>;

// A combine that may be applied in any grouping and any order (+, max): it says so with a
// `static constexpr bool regroupable = true` member. The exact handlers ignore the mark (they
// fold in the order the contract fixes); the fast handler (gpu/fast.hpp) folds such a row as a
// tree across a block, which changes the result only by rounding, within its documented tolerances.
template <class C>
concept Regroupable = requires { requires C::regroupable; };

namespace archetype {
// Stand-ins used only to ask "does the handler accept any kernel/combine?".
struct Kernel {
  OSPREY_FN Scalar operator()(Index) const { return 0.0; }
};
struct Combine {
  OSPREY_FN Scalar operator()(Scalar, Scalar) const { return 0.0; }
};
// The same for a handler's own kernel types (declared only: asked about, never called).
template <class I, class S>
struct KernelFor {
  S operator()(I) const;
};
template <class S>
struct CombineFor {
  S operator()(S, S) const;
};
}  // namespace archetype

namespace effect {

template <class H>
concept HasBuffer = requires(const typename H::Buffer& b) {
  { b.view() } -> ReadView;
} && std::copyable<typename H::Buffer>;

template <class H>
concept Build = HasBuffer<H> && requires(H& h, Index n, archetype::KernelFor<KernelIndex<H>, KernelScalar<H>> k) {
  { h.build(n, k) } -> std::same_as<Result<typename H::Buffer>>;
};
template <class H>
concept Get = HasBuffer<H> && requires(H& h, const typename H::Buffer& b, Index i) {
  { h.get(b, i) } -> std::same_as<Scalar>;
};
template <class H>
concept Length = HasBuffer<H> && requires(H& h, const typename H::Buffer& b) {
  { h.length(b) } -> std::same_as<Index>;
};
template <class H>
concept ZipWith = HasBuffer<H> && requires(H& h, const typename H::Buffer& b, archetype::CombineFor<KernelScalar<H>> c) {
  { h.zipWith(b, b, c) } -> std::same_as<Result<typename H::Buffer>>;
};
template <class H>
concept Reduce = HasBuffer<H> && requires(H& h, const typename H::Buffer& b, archetype::CombineFor<KernelScalar<H>> c) {
  { h.reduce(b, Scalar{}, c) } -> std::same_as<Result<Scalar>>;
};
template <class H>
concept IndexOf = HasBuffer<H> && requires(H& h, const typename H::Buffer& b, Scalar x) {
  { h.indexOf(b, x) } -> std::same_as<Result<Index>>;
};
template <class H>
concept MatMul = HasBuffer<H> && requires(H& h, const typename H::Buffer& b, Index n) {
  { h.matMul(b, b, n, n, n) } -> std::same_as<Result<typename H::Buffer>>;
};
template <class H>
concept FromList = HasBuffer<H> && requires(H& h, std::span<const Scalar> xs) {
  { h.fromList(xs) } -> std::same_as<Result<typename H::Buffer>>;
};
template <class H>
concept Load = HasBuffer<H> && requires(H& h, const std::string& path, const std::string& name) {
  { h.load(path, name) } -> std::same_as<Result<typename H::Buffer>>;
};
template <class H>
concept Device = requires(const H& h) {
  { h.device() } -> std::same_as<std::string>;
};

}  // namespace effect

// A handler answers every operation of the effect.
template <class H>
concept Tensor = effect::Build<H> && effect::Get<H> && effect::Length<H> && effect::ZipWith<H> &&
                 effect::Reduce<H> && effect::IndexOf<H> && effect::MatMul<H> &&
                 effect::FromList<H> && effect::Load<H> && effect::Device<H>;

// Buffer type of a handler.
template <class H>
using BufferOf = typename H::Buffer;

}  // namespace osprey

// Placed at the end of every handler header: one assertion per operation, so a missing or
// mistyped operation is reported by name.
#define OSPREY_ASSERT_HANDLER(H, NAME)                                                              \
  static_assert(::osprey::effect::HasBuffer<H>, NAME " handler: Buffer type with view() missing");  \
  static_assert(::osprey::effect::Build<H>, NAME " handler: operation build(n, kernel) missing or mistyped"); \
  static_assert(::osprey::effect::Get<H>, NAME " handler: operation get(b, i) missing or mistyped"); \
  static_assert(::osprey::effect::Length<H>, NAME " handler: operation length(b) missing or mistyped"); \
  static_assert(::osprey::effect::ZipWith<H>, NAME " handler: operation zipWith(a, b, combine) missing or mistyped"); \
  static_assert(::osprey::effect::Reduce<H>, NAME " handler: operation reduce(b, seed, combine) missing or mistyped"); \
  static_assert(::osprey::effect::IndexOf<H>, NAME " handler: operation indexOf(b, x) missing or mistyped"); \
  static_assert(::osprey::effect::MatMul<H>, NAME " handler: operation matMul(a, b, rows, inner, cols) missing or mistyped"); \
  static_assert(::osprey::effect::FromList<H>, NAME " handler: operation fromList(span) missing or mistyped"); \
  static_assert(::osprey::effect::Load<H>, NAME " handler: operation load(path, name) missing or mistyped"); \
  static_assert(::osprey::effect::Device<H>, NAME " handler: operation device() missing or mistyped"); \
  static_assert(::osprey::Tensor<H>)
