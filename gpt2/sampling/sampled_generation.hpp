// Generation that samples (gpt2/sampling/sampling.hpp), written once over the handler: the
// prompt's pass, then per token the logits row read back to the host (one bulk copy), the draw
// there, and one cached step for the token drawn. On the exact handlers the rows are the same
// doubles, so the tokens are too. The fast handler runs the same loop (its float row widened to
// doubles): its decoding graph (fast/decode_graph.hpp) keeps the argmax on the device and is for
// greedy decoding only.
#pragma once

#include <span>
#include <vector>

#include "gpt2/model/generate.hpp"
#include "gpt2/sampling/sampling.hpp"
#include "gpt2/train/host_copy.hpp"  // hostValues: a buffer's elements in one copy

namespace gpt2 {

// `count` sampled tokens after the prompt's pass (`step`); the first is the token at
// `firstPosition` (the prompt's length). onToken(int id) as for continueGreedy.
template <osprey::Tensor H, class OnToken>
osprey::Result<std::vector<int>> continueSampled(H& h, const ForwardWeights<H>& w, StepOut<H>& step,
                                                 osprey::Index firstPosition, osprey::Index count,
                                                 const sampling::SamplingSettings& settings, OnToken& onToken) {
  return detail::continueChoosing(h, w, step, count,
      [&](osprey::Index i, const Buf<H>& logits) -> osprey::Result<int> {
        const std::vector<osprey::Scalar> row = OSPREY_TRY(train::hostValues(h, logits));  // (V)
        return sampling::sampleToken(std::span<const osprey::Scalar>(row), settings,
                                     static_cast<std::uint64_t>(firstPosition + i));
      },
      onToken);
}

// The continuation of `prompt` by `count` tokens: greedy (generateGreedy, unchanged) when the
// settings say so, else sampled. Settings out of range are an error (checkSampling).
template <osprey::Tensor H, class OnToken>
osprey::Result<std::vector<int>> generateTokens(H& h, const ForwardWeights<H>& w, std::span<const int> prompt,
                                                osprey::Index count, const sampling::SamplingSettings& settings,
                                                OnToken&& onToken) {
  OSPREY_CHECK(sampling::checkSampling(settings));
  if (settings.greedy()) return generateGreedy(h, w, prompt, count, onToken);
  const auto T = static_cast<osprey::Index>(prompt.size());
  return detail::afterPrompt(h, w, prompt, count, [&](StepOut<H>& step) {
    return continueSampled(h, w, step, T, count, settings, onToken);
  });
}

}  // namespace gpt2
