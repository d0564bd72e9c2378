// Several<K>: K values one kernel computes together, for the optional operation buildEach<K>
// (a handler that has it makes K buffers in one pass, element i of buffer j being kernel(i).v[j]).
// Where outputs share their inputs (AdamW's moments and parameter), one pass reads those inputs
// once instead of once per output.
#pragma once

#include <concepts>
#include <type_traits>

#include "osprey/config.hpp"
#include "osprey/effect.hpp"

namespace osprey {

template <int K>
struct Several {
  static_assert(K >= 1, "Several holds at least one value");
  Scalar v[K];
};

// kernel(i) -> Several<K>, for buildEach.
template <class F, int K>
concept KernelOfSeveral = Closure<F> && std::invocable<const F&, Index> &&
                          std::same_as<std::invoke_result_t<const F&, Index>, Several<K>>;

}  // namespace osprey
