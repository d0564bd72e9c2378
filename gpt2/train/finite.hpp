// Finding NaN and infinities in parameters, so that a step that overflowed stops the run before
// its numbers are trusted or saved.
//
// On the handler (every step, on the new weights): the elements are dealt out to
// ceil(n / kFiniteRun) kernel threads, thread r testing elements r, r + threads, r + 2·threads, ...
// (neighbouring threads read neighbouring elements, so a warp's reads share cache lines), and the
// per-thread answers are summed on the device; the weights never leave it, and the step waits for
// the answer once. (A reduce over the tensor itself would be one device thread walking 124M
// elements.) On the host (before a save, on the copy the save makes
// anyway): the first bad element, named (gpt2/model/finite_weights.hpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "gpt2/layers/fold_rows.hpp"
#include "gpt2/model/finite_weights.hpp"  // firstNonFinite: the host-side check
#include "gpt2/model/weights.hpp"
#include "gpt2/train/step.hpp"

namespace gpt2::train {

inline constexpr osprey::Index kFiniteRun = 1024;

// runs (ceil(n / kFiniteRun)): 1 where one of the elements run r tests (r, r + runs, ...) is NaN
// or infinite, else 0. Which element lands in which run does not change whether the answers sum
// to zero, so the runs are strided for coalesced reads. (A range test, not arithmetic, so no
// compiler may fold it away: NaN fails both comparisons, an infinity one of them.)
template <osprey::Tensor H>
osprey::Result<Buf<H>> nonFiniteRuns(H& h, const Buf<H>& x) {
  const osprey::Index n = h.length(x);
  const osprey::Index runs = (n + kFiniteRun - 1) / kFiniteRun;
  const auto xv = x.view();
  const osprey::Int N = n, S = runs;
  return h.build(runs, [=] OSPREY_FN(osprey::Index r) -> osprey::Scalar {
    const osprey::Scalar top = 1.7976931348623157e308;  // the largest double
    osprey::Scalar bad = 0.0;
    for (osprey::Int i = r; i < N; i += S)
      if (!(xv[i] >= -top && xv[i] <= top)) bad = 1.0;
    return bad;
  });
}

// Whether some element of x is NaN or infinite.
template <osprey::Tensor H>
osprey::Result<bool> holdsNonFinite(H& h, const Buf<H>& x) {
  if (h.length(x) == 0) return false;
  const auto runs = OSPREY_TRY(nonFiniteRuns(h, x));
  const osprey::Scalar count = OSPREY_TRY(h.reduce(runs, 0.0,
      [=] OSPREY_FN(osprey::Scalar a, osprey::Scalar b) -> osprey::Scalar { return a + b; }));
  return count != 0.0;
}

// The index of the first tensor of w holding a NaN or an infinity, or nullopt. Every step asks,
// so the common answer (none) waits on the device once: each tensor's runs are counted on the
// device (a one-row sum) into one running total, read once; only a non-zero total looks for the
// tensor, one by one.
template <osprey::Tensor H>
osprey::Result<std::optional<std::size_t>> firstNonFiniteTensor(H& h, const Weights<Buf<H>>& w) {
  std::optional<Buf<H>> total;
  for (const Buf<H>& x : w.tensors) {
    if (h.length(x) == 0) continue;
    const auto runs = OSPREY_TRY(nonFiniteRuns(h, x));
    const auto rv = runs.view();
    auto count = OSPREY_TRY(sumRows(h, 1, h.length(runs),
        [=] OSPREY_FN(osprey::Index, osprey::Index c) -> osprey::Scalar { return rv[c]; }, AsIs{}));  // (1)
    total = total ? OSPREY_TRY(h.zipWith(*total, count,
                                         [=] OSPREY_FN(osprey::Scalar a, osprey::Scalar b) -> osprey::Scalar {
                                           return a + b;
                                         }))
                  : std::move(count);
  }
  if (!total || h.get(*total, 0) == 0.0) return std::optional<std::size_t>();
  for (std::size_t i = 0; i < w.tensors.size(); ++i)
    if (OSPREY_TRY(holdsNonFinite(h, w.tensors[i]))) return std::optional<std::size_t>(i);
  return std::optional<std::size_t>();
}

}  // namespace gpt2::train
