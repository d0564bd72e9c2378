// The optimiser of the training step: AdamW over all 2 + 12·L + 2 parameter tensors, with its
// state (the step counter and the first and second moments of every tensor).
//
// Hyper-parameters default to PyTorch's torch.optim.AdamW except the learning rate and weight
// decay, which the command line sets: betas (0.9, 0.999), eps 1e-8, weight decay 0 unless asked.
// Weight decay applies to the 2-D tensors only (wte, wpe and the four matrices of each block),
// never to biases or LayerNorm gains, as GPT-2 training does. The update of one tensor is
// layers/adamw.hpp's adamwUpdate (torch's formula, element-wise).
#pragma once

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpt2/layers/adamw.hpp"
#include "gpt2/train/step.hpp"
#include "gpt2/model/weights.hpp"

namespace gpt2::train {

// The command line's defaults: torch.optim.AdamW's, with lr 1e-3 and no weight decay.
inline AdamWSettings defaultAdamW() {
  AdamWSettings s;
  s.lr = 1e-3;
  s.beta1 = 0.9;
  s.beta2 = 0.999;
  s.eps = 1e-8;
  s.weightDecay = 0.0;
  return s;
}

// AdamW's state: step = how many updates have been applied (the next one is step + 1).
template <osprey::Tensor H>
struct OptimizerState {
  Index step = 0;
  Params<H> m;  // first moments, one tensor per parameter
  Params<H> v;  // second moments
};

// n zeros.
template <osprey::Tensor H>
osprey::Result<Buf<H>> zeros(H& h, Index n) {
  return h.build(n, [=] OSPREY_FN(KernelIndex<H>) -> KernelScalar<H> { return 0.0; });
}

// The state before the first step: moments of zeros shaped like the parameters.
template <osprey::Tensor H>
osprey::Result<OptimizerState<H>> freshOptimizer(H& h, const Params<H>& w) {
  OptimizerState<H> s;
  s.m.config = s.v.config = w.config;
  for (const Buf<H>& t : w.tensors) {
    s.m.tensors.push_back(OSPREY_TRY(zeros(h, h.length(t))));
    s.v.tensors.push_back(OSPREY_TRY(zeros(h, h.length(t))));
  }
  return s;
}

// Whether AdamW decays parameter tensor `index` (the 2-D ones).
inline bool decaysTensor(const Config& c, Index index) {
  const Index lnf = lnfWeightIndex(c);
  if (index == kWteIndex || index == kWpeIndex) return true;
  if (index >= lnf) return false;
  const auto slot = static_cast<BlockSlot>((index - 2) % kSlotsPerBlock);
  return slot == BlockSlot::AttnWeight || slot == BlockSlot::AttnProjWeight ||
         slot == BlockSlot::FcWeight || slot == BlockSlot::FcProjWeight;
}

// The parameters and state after one AdamW step with gradients g.
template <osprey::Tensor H>
struct Updated {
  Params<H> weights;
  OptimizerState<H> state;
};

template <osprey::Tensor H>
osprey::Result<Updated<H>> adamwStep(H& h, const Params<H>& w, const OptimizerState<H>& s,
                                     const Params<H>& g, const AdamWSettings& settings) {
  const std::size_t n = w.tensors.size();
  if (g.tensors.size() != n || s.m.tensors.size() != n || s.v.tensors.size() != n)
    return osprey::Error{fmt::format("adamw: {} parameters but {} gradients and {}/{} moments", n,
                                     g.tensors.size(), s.m.tensors.size(), s.v.tensors.size())};
  Updated<H> out;
  out.weights.config = out.state.m.config = out.state.v.config = w.config;
  out.state.step = s.step + 1;
  std::vector<bool> decay(n);
  for (std::size_t i = 0; i < n; ++i) decay[i] = decaysTensor(w.config, static_cast<Index>(i));
  auto updates = OSPREY_TRY(adamwUpdates(h, w.tensors, g.tensors, s.m.tensors, s.v.tensors, out.state.step,
                                         settings, decay));
  for (auto& u : updates) {
    out.weights.tensors.push_back(std::move(u.param));
    out.state.m.tensors.push_back(std::move(u.m));
    out.state.v.tensors.push_back(std::move(u.v));
  }
  return out;
}

}  // namespace gpt2::train
