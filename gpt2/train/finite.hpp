// Finding NaN and infinities in parameters, so that a step that overflowed stops the run before
// its numbers are trusted or saved.
//
// On the handler (every step, on the new weights): kernel thread r tests elements r, r + runs,
// r + 2·runs, ... (kFiniteRun of them; neighbouring threads read neighbouring elements, so a warp's
// reads share cache lines), eight loads in flight at a time, and the per-thread answers are counted
// on the device; the weights never leave it, and the step waits for the answer once. A thread's
// loads are few and batched because each load waits hundreds of cycles for memory: a thread
// walking a long run one load after another made up most of the 43 ms that one exact step spent
// in element builds (the kernel clock, bench/RESULTS.md). On the host (before a save, on the copy
// the save makes anyway): the first bad element, named (gpt2/model/finite_weights.hpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpt2/layers/common.hpp"  // OSPREY_GPT2_DERIVED
#include "gpt2/layers/fold_rows.hpp"
#include "gpt2/model/finite_weights.hpp"  // firstNonFinite: the host-side check
#include "gpt2/model/weights.hpp"
#include "gpt2/train/step.hpp"

namespace gpt2::train {

inline constexpr osprey::Index kFiniteRun = 64;   // elements a thread tests
inline constexpr int kFiniteBatch = 8;             // of them loaded together

// runs (ceil(n / kFiniteRun)): 1 where one of the elements run r tests (r, r + runs, ...) is NaN
// or infinite, else 0. Which element lands in which run does not change whether the answers sum
// to zero, so the runs are strided for coalesced reads. A batch's indices are all computed (and
// checked) before any of its loads, so no fault path stands between the loads and they are in
// flight together. (A range test, not arithmetic, so no compiler may fold it away: NaN fails both
// comparisons, an infinity one of them.)
template <osprey::Tensor H>
osprey::Result<Buf<H>> nonFiniteRuns(H& h, const Buf<H>& x) {
  const osprey::Index n = h.length(x);
  const osprey::Index runs = (n + kFiniteRun - 1) / kFiniteRun;
  const auto xv = x.view();
  const osprey::Int N = n, S = runs;
  return h.build(runs, [=] OSPREY_FN(KernelIndex<H> r) -> KernelScalar<H> {
    const osprey::Scalar top = 1.7976931348623157e308;  // the largest double
    // The captures, named before the branches below (nvcc: an extended lambda may not first
    // capture a variable inside an if constexpr).
    const auto values = xv;
    const osprey::Int end = N, stride = S;
    const osprey::Index size = n;
    if constexpr (osprey::TracedValue<KernelIndex<H>>) {
      // Traced (osprey/trace/): the same elements tested, one at a time, in one loop of the kernel.
      using Flag = KernelScalar<H>;
      return osprey::walkChain(
          Flag(0.0), r, end,
          [&](auto k, Flag bad) { return osprey::select(!(values[k] >= -top && values[k] <= top), Flag(1.0), bad); },
          [&](auto k) { return k + stride; });
    } else {
      osprey::Scalar bad = 0.0;
      for (osprey::Int first = r; first < end; first += stride * kFiniteBatch) {
        osprey::Index at[kFiniteBatch];
        for (int u = 0; u < kFiniteBatch; ++u) at[u] = (first + stride * u).raw();
        osprey::Scalar v[kFiniteBatch];
        for (int u = 0; u < kFiniteBatch; ++u) v[u] = at[u] < size ? values[at[u]] : 0.0;
        for (int u = 0; u < kFiniteBatch; ++u)
          if (!(v[u] >= -top && v[u] <= top)) bad = 1.0;
      }
      return bad;
    }
  });
}

// The sum of flags (0 or 1 each) as a one-element buffer, on the device: rows of kFiniteRun summed
// in parallel, level after level, until one row is left. The sums are small whole numbers, exact
// in any order.
template <osprey::Tensor H>
osprey::Result<Buf<H>> countOnDevice(H& h, Buf<H> flags) {
  while (h.length(flags) > kFiniteRun) {
    const osprey::Index n = h.length(flags), rows = (n + kFiniteRun - 1) / kFiniteRun;
    const auto fv = flags.view();
    const osprey::Int N = n, R = kFiniteRun;
    flags = OSPREY_TRY(sumRaggedRows(h, rows,
        [=] OSPREY_FN(KernelIndex<H> r) -> KernelIndex<H> {
          const auto left = (N - osprey::asInt(r) * R).raw();
          return osprey::select(left < kFiniteRun, left, KernelIndex<H>(kFiniteRun));
        },
        [=] OSPREY_FN(KernelIndex<H> r, KernelIndex<H> c) -> KernelScalar<H> { return fv[osprey::asInt(r) * R + c]; },
        AsIs{}));
  }
  const auto fv = flags.view();
  return sumRows(h, 1, h.length(flags),
      [=] OSPREY_FN(KernelIndex<H>, KernelIndex<H> c) -> KernelScalar<H> { return fv[c]; }, AsIs{});
}

namespace reference {
// Whether some element of some tensor is NaN or infinite: each tensor's runs are counted on the
// device (countOnDevice) into one running total, and the total is read once.
template <osprey::Tensor H>
osprey::Result<bool> anyNonFinite(H& h, const std::vector<Buf<H>>& tensors) {
  std::optional<Buf<H>> total;
  for (const Buf<H>& x : tensors) {
    if (h.length(x) == 0) continue;
    auto runs = OSPREY_TRY(nonFiniteRuns(h, x));
    auto count = OSPREY_TRY(countOnDevice(h, std::move(runs)));
    total = total ? OSPREY_TRY(h.zipWith(*total, count,
                                         [=] OSPREY_FN(KernelScalar<H> a, KernelScalar<H> b) -> KernelScalar<H> {
                                           return a + b;
                                         }))
                  : std::move(count);
  }
  return total && h.get(*total, 0) != 0.0;
}
}  // namespace reference

// Whether some element of some tensor is NaN or infinite; a handler may answer it itself (the fast
// handler: a few launches for a step's tensors, where the reference takes about four a tensor).
template <osprey::Tensor H>
osprey::Result<bool> anyNonFinite(H& h, const std::vector<Buf<H>>& tensors) {
  OSPREY_GPT2_DERIVED(anyNonFinite, tensors)
  return reference::anyNonFinite(h, tensors);
}

// Whether some element of x is NaN or infinite.
template <osprey::Tensor H>
osprey::Result<bool> holdsNonFinite(H& h, const Buf<H>& x) {
  return anyNonFinite(h, std::vector<Buf<H>>{x});
}

// The index of the first tensor of w holding a NaN or an infinity, or nullopt. Every step asks,
// so the common answer (none) waits on the device once (anyNonFinite); only a bad step looks for
// the tensor, one by one.
template <osprey::Tensor H>
osprey::Result<std::optional<std::size_t>> firstNonFiniteTensor(H& h, const Weights<Buf<H>>& w) {
  if (!OSPREY_TRY(anyNonFinite(h, w.tensors))) return std::optional<std::size_t>();
  for (std::size_t i = 0; i < w.tensors.size(); ++i)
    if (OSPREY_TRY(holdsNonFinite(h, w.tensors[i]))) return std::optional<std::size_t>(i);
  return std::optional<std::size_t>();
}

}  // namespace gpt2::train
