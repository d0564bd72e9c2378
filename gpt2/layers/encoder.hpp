// The embedding layer: token embedding plus learned position embedding, and its backward.
//
//   forward   out[n][c] = wte[tokens[n]][c] + wpe[posOffset + n % T][c]
//   backward  dwte[v][c] = sum over n with tokens[n] == v of dout[n][c]   (n ascending, from 0.0)
//             dwpe[p][c] = sum over b of dout[b*T + (p - posOffset)][c]  (b ascending, from 0.0)
//
// The backward never scatters (no atomics, no order that depends on threads): each gradient
// element gathers its contributions itself, following a linked list of the rows that hold the
// same token, built once from the tokens (first occurrence per id, next occurrence per row).
#pragma once

#include "gpt2/layers/common.hpp"

namespace gpt2 {

template <class H>
struct EncoderGrads {
  Buf<H> dwte;  // (V, C)
  Buf<H> dwpe;  // (maxT, C)
};

namespace detail {
// encoderBackward's operands: dout (N, C), tokens (N), whole sequences of T rows at positions
// [posOffset, posOffset + T) within maxT, and dwteBase (V, C) when given; V·C and maxT·C fit.
template <osprey::Tensor H>
osprey::Result<void> checkEncoderBackward(H& h, const Buf<H>& dout, const Buf<H>& tokens, const Buf<H>* dwteBase,
                                          osprey::Index N, osprey::Index T, osprey::Index C, osprey::Index V,
                                          osprey::Index maxT, osprey::Index posOffset) {
  const char* L = "encoder backward";
  OSPREY_CHECK(checkLength(h, dout, OSPREY_TRY(checkedProduct(L, {N, C})), L, "dout"));
  OSPREY_CHECK(checkLength(h, tokens, N, L, "tokens"));
  if (T <= 0 || N % T != 0)
    return osprey::Error{fmt::format("{}: {} rows are not whole sequences of length {}", L, N, T)};
  if (posOffset < 0 || posOffset > maxT || T > maxT - posOffset)
    return osprey::Error{fmt::format("{}: positions [{}, {}) exceed the context of {}", L, posOffset,
                                     posOffset + T, maxT)};
  const osprey::Index VC = OSPREY_TRY(checkedProduct(L, {V, C}));
  (void)OSPREY_TRY(checkedProduct(L, {maxT, C}));
  if (dwteBase) OSPREY_CHECK(checkLength(h, *dwteBase, VC, L, "dwte base"));
  return {};
}
}  // namespace detail

namespace reference {

// out (N, C) from tokens (N) [ids as doubles], wte (V, C), wpe (maxT, C); row n sits at position
// posOffset + n % T (T rows per sequence; posOffset > 0 when continuing a KV-cached sequence).
template <osprey::Tensor H>
osprey::Result<Buf<H>> encoderForward(H& h, const Buf<H>& tokens, const Buf<H>& wte,
                                      const Buf<H>& wpe, osprey::Index N, osprey::Index T,
                                      osprey::Index C, osprey::Index posOffset) {
  const char* L = "encoder";
  const osprey::Index NC = OSPREY_TRY(checkedProduct(L, {N, C}));
  OSPREY_CHECK(checkLength(h, tokens, N, L, "tokens"));
  if (C <= 0) return osprey::Error{fmt::format("{}: channels must be positive, got {}", L, C)};
  if (T <= 0 || N % T != 0)
    return osprey::Error{fmt::format("{}: {} rows are not whole sequences of length {}", L, N, T)};
  if (h.length(wte) % C != 0 || h.length(wpe) % C != 0)
    return osprey::Error{fmt::format("{}: wte ({}) and wpe ({}) must be whole rows of {} channels",
                                     L, h.length(wte), h.length(wpe), C)};
  const osprey::Index V = h.length(wte) / C, maxT = h.length(wpe) / C;
  if (posOffset < 0 || posOffset > maxT || T > maxT - posOffset)
    return osprey::Error{fmt::format("{}: positions [{}, {}) exceed the context of {}", L, posOffset,
                                     posOffset + T, maxT)};
  const auto tok = tokens.view(), te = wte.view(), pe = wpe.view();
  const osprey::Int Ci = C, Ti = T, P0 = posOffset;
  return h.build(NC, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto nC = divMod(osprey::asInt(i), Ci);
    const auto n = nC.q, c = nC.r;
    const auto id = tokenIndex(tok[n], V);
    const auto p = P0 + n % Ti;
    return te[id * Ci + c] + pe[p * Ci + c];
  });
}

// dwte (V, C), dwpe (maxT, C) from dout (N, C), the tokens (N) of the forward, V and maxT.
// With dwteBase (V, C) (another contribution to the same tensor, e.g. the tied lm head's), dwte is
// base + gathered sum, element by element: the same doubles as add(base, dwte without a base),
// without a separate pass over the (V, C) table.
template <osprey::Tensor H>
osprey::Result<EncoderGrads<H>> encoderBackward(H& h, const Buf<H>& dout, const Buf<H>& tokens,
                                                const Buf<H>* dwteBase, osprey::Index N,
                                                osprey::Index T, osprey::Index C, osprey::Index V,
                                                osprey::Index maxT, osprey::Index posOffset) {
  OSPREY_CHECK(detail::checkEncoderBackward(h, dout, tokens, dwteBase, N, T, C, V, maxT, posOffset));
  const osprey::Index VC = V * C, PC = maxT * C;
  const auto tok = tokens.view(), d = dout.view();
  const auto base = dwteBase ? dwteBase->view() : decltype(tokens.view()){};
  const bool hasBase = dwteBase != nullptr;
  const osprey::Int Ni = N, Ci = C, Ti = T, P0 = posOffset;

  // next (N): the next row after n holding the same token, or N. (Also validates every token.)
  auto next = OSPREY_TRY(h.build(N, [=] OSPREY_FN(KernelIndex<H> n) -> KernelScalar<H> {
    const auto id = osprey::toScalar(tokenIndex(tok[n], V).raw());
    return osprey::firstWhere(osprey::asInt(n) + 1, Ni, KernelScalar<H>(static_cast<osprey::Scalar>(N)),
                              [&](auto m) { return tok[m] == id; });
  }));
  // first (V): the first row holding token v, or N when none does (ids are exact integers, so
  // comparing the doubles is comparing the ids).
  auto first = OSPREY_TRY(h.build(V, [=] OSPREY_FN(KernelIndex<H> v) -> KernelScalar<H> {
    const auto id = osprey::toScalar(v);
    return osprey::firstWhere(osprey::Int(0), Ni, KernelScalar<H>(static_cast<osprey::Scalar>(N)),
                              [&](auto n) { return tok[n] == id; });
  }));
  const auto fv = first.view(), nv = next.view();
  auto dwte = OSPREY_TRY(h.build(VC, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    const auto vC = divMod(osprey::asInt(i), Ci);
    const auto v = vC.q, c = vC.r;
    const KernelScalar<H> acc = osprey::walkChain(
        KernelScalar<H>(0.0), osprey::toIndex(fv[v]), N, [&](auto n, auto sum) { return sum + d[osprey::asInt(n) * Ci + c]; },
        [&](auto n) { return osprey::toIndex(nv[n]); });
    return hasBase ? base[i] + acc : acc;
  }));
  const osprey::Int Bi = osprey::asInt(N) / Ti;
  auto dwpe = OSPREY_TRY(h.build(PC, [=] OSPREY_FN(KernelIndex<H> i) -> KernelScalar<H> {
    using S = KernelScalar<H>;
    const auto pC = divMod(osprey::asInt(i), Ci);
    const auto p = pC.q, c = pC.r;
    return osprey::when(
        p < P0 || p >= P0 + Ti, [&] { return S(0.0); },
        [&] {
          const auto t = p - P0;
          return S(osprey::foldRange(S(0.0), osprey::Int(0), Bi,
                                     [&](auto b, auto sum) { return sum + d[(b * Ti + t) * Ci + c]; }));
        });
  }));
  return EncoderGrads<H>{std::move(dwte), std::move(dwpe)};
}

}  // namespace reference

template <osprey::Tensor H>
osprey::Result<Buf<H>> encoderForward(H& h, const Buf<H>& tokens, const Buf<H>& wte,
                                      const Buf<H>& wpe, osprey::Index N, osprey::Index T,
                                      osprey::Index C, osprey::Index posOffset) {
  OSPREY_GPT2_DERIVED(encoderForward, tokens, wte, wpe, N, T, C, posOffset)
  return reference::encoderForward(h, tokens, wte, wpe, N, T, C, posOffset);
}

// dwte (V, C), dwpe (maxT, C): the embedding gradients from dout (N, C).
template <osprey::Tensor H>
osprey::Result<EncoderGrads<H>> encoderBackward(H& h, const Buf<H>& dout, const Buf<H>& tokens,
                                                osprey::Index N, osprey::Index T, osprey::Index C,
                                                osprey::Index V, osprey::Index maxT,
                                                osprey::Index posOffset) {
  OSPREY_GPT2_DERIVED(encoderBackward, dout, tokens, N, T, C, V, maxT, posOffset)
  return reference::encoderBackward(h, dout, tokens, static_cast<const Buf<H>*>(nullptr), N, T, C,
                                    V, maxT, posOffset);
}

// The same with dwte = dwteBase (V, C) + the embedding's gradient: for the tied embedding, pass
// the lm head's share (matmulBackwardTransposed's dwt). Equal bit for bit to
// add(dwteBase, encoderBackward(...).dwte), one (V, C) pass cheaper.
template <osprey::Tensor H>
osprey::Result<EncoderGrads<H>> encoderBackwardOnto(H& h, const Buf<H>& dwteBase, const Buf<H>& dout,
                                                    const Buf<H>& tokens, osprey::Index N,
                                                    osprey::Index T, osprey::Index C, osprey::Index V,
                                                    osprey::Index maxT, osprey::Index posOffset) {
  OSPREY_GPT2_DERIVED(encoderBackwardOnto, dwteBase, dout, tokens, N, T, C, V, maxT, posOffset)
  return reference::encoderBackward(h, dout, tokens, &dwteBase, N, T, C, V, maxT, posOffset);
}

}  // namespace gpt2
