// The sampler of sampling.hpp: the steps are numbered as there.
#include "gpt2/sampling/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "gpt2/sampling/philox.hpp"
#include "osprey/math.hpp"

namespace gpt2::sampling {

osprey::Result<void> checkSampling(const SamplingSettings& s) {
  if (!std::isfinite(s.temperature) || s.temperature < 0.0)
    return osprey::Error{fmt::format("--temperature {}: give a finite number, 0 for greedy decoding or above 0 to "
                                     "sample", s.temperature)};
  if (s.topK < 0)
    return osprey::Error{fmt::format("--top-k {}: give 0 (no cut) or the number of likeliest tokens to keep", s.topK)};
  if (!(s.topP > 0.0 && s.topP <= 1.0))
    return osprey::Error{fmt::format("--top-p {}: give a probability above 0 and at most 1 (1: no cut)", s.topP)};
  if (s.greedy() && (s.topK != 0 || s.topP != 1.0))
    return osprey::Error{fmt::format("--top-k and --top-p shape sampling, and temperature 0 decodes greedily: give "
                                     "--temperature above 0 (1 samples from the model's own distribution)")};
  return {};
}

double uniformAt(std::uint64_t seed, std::uint64_t position) {
  const PhiloxKey key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  const PhiloxCounter counter{static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(position >> 32), 0, 0};
  const PhiloxCounter out = philox4x32_10(counter, key);
  const std::uint64_t bits = ((std::uint64_t{out[0]} << 32) | out[1]) >> 11;  // 53 bits
  return static_cast<double>(bits) * 0x1p-53;                                  // exact
}

osprey::Result<int> sampleToken(std::span<const osprey::Scalar> logits, const SamplingSettings& s,
                                std::uint64_t position) {
  const std::size_t V = logits.size();
  if (V == 0) return osprey::Error{"sampling: the logits row is empty"};
  // 1. Scaled logits; NaN or +inf is activations gone wrong, never a token.
  std::vector<osprey::Scalar> z(V);
  for (std::size_t v = 0; v < V; ++v) {
    const osprey::Scalar l = logits[v];
    if (std::isnan(l) || l == HUGE_VAL)
      return osprey::Error{fmt::format("sampling: logit {} is {}: the model's activations are not finite (the weights "
                                       "are broken or too large)", v, l)};
    z[v] = l / s.temperature;
  }
  // 2-3. The likeliest first, ties by index; only the first `kept` need to be in place.
  const std::size_t kept = s.topK > 0 && static_cast<std::size_t>(s.topK) < V ? static_cast<std::size_t>(s.topK) : V;
  std::vector<std::uint32_t> order(V);
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(),
                    [&z](std::uint32_t a, std::uint32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  const osprey::Scalar top = z[order[0]];
  if (top == HUGE_VAL)
    return osprey::Error{fmt::format("sampling: --temperature {} is so small that a logit divided by it overflows: "
                                     "use a larger temperature, or 0 for greedy decoding", s.temperature)};
  if (top == -HUGE_VAL) return osprey::Error{"sampling: every logit is -inf: there is no token to draw"};
  // 4. Weights relative to the largest, and their running sums in that order.
  std::vector<osprey::Scalar> cumulative(kept);
  osprey::Scalar sum = 0.0;
  for (std::size_t j = 0; j < kept; ++j) {
    sum = sum + osprey::math::exp(z[order[j]] - top);
    cumulative[j] = sum;
  }
  // 5. The nucleus: the shortest prefix holding at least p of the weight.
  std::size_t n = kept;
  if (s.topP < 1.0) {
    const osprey::Scalar threshold = s.topP * sum;
    n = static_cast<std::size_t>(std::lower_bound(cumulative.begin(), cumulative.end(), threshold) -
                                 cumulative.begin()) + 1;
  }
  // 6-7. Inverse transform on the unnormalised running sums.
  const osprey::Scalar total = cumulative[n - 1];
  const osprey::Scalar r = uniformAt(s.seed, position) * total;
  const auto first = cumulative.begin(), end = cumulative.begin() + static_cast<std::ptrdiff_t>(n);
  auto at = std::upper_bound(first, end, r);              // the first c_j > r
  if (at == end) at = std::lower_bound(first, end, total);  // r rounded up to the total
  return static_cast<int>(order[static_cast<std::size_t>(at - first)]);
}

}  // namespace gpt2::sampling
