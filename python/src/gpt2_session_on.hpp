// Gpt2Session (gpt2_session.hpp) on handler H, written once: instantiated for lists and gpu/host
// by g++ (gpt2_host_sessions.cpp) and for gpu/cuda and fast by nvcc (gpt2_cuda_sessions.cu).
//
// The weights are held in the checkpoint's layout (what training updates) and, while no step has
// changed them, in the forward pass's layout too (prepareForward's transposes, made on first use).
// Every call runs under `strictly`, and on a device that queues its work (cuda) waits for it before
// returning, so a kernel's fault is that call's Error and nothing is left pending.
#pragma once

#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "gpt2/model/generate.hpp"
#include "gpt2/model/model.hpp"
#include "gpt2/sampling/sampled_generation.hpp"
#include "gpt2/train/adamw.hpp"
#include "gpt2/train/finite.hpp"
#include "gpt2/train/host_copy.hpp"
#include "gpt2/train/limits.hpp"
#include "gpt2/train/step.hpp"
#include "gpt2_session.hpp"
#include "osprey/strict.hpp"

namespace osprey::python {

// Why `ids` cannot be a sequence for this model, or nothing.
inline Result<void> checkIds(const gpt2::Config& c, std::span<const int> ids) {
  for (int id : ids)
    if (id < 0 || id >= c.V)
      return Error{fmt::format("token id {} is outside the model's vocabulary of {}", id, c.V)};
  return {};
}

template <osprey::Tensor H>
class Gpt2SessionOn final : public Gpt2Session {
 public:
  // A check of the model's shape before generating (the fast handler's decoding kernels take some
  // shapes only): an Error message, or nothing.
  using GenerationCheck = std::optional<std::string> (*)(const gpt2::Config&);

  static Result<std::unique_ptr<Gpt2Session>> open(H handler, const gpt2::HostWeights& weights,
                                                    GenerationCheck generationCheck = nullptr) {
    std::unique_ptr<Gpt2SessionOn> s(new Gpt2SessionOn(std::move(handler), weights.config, generationCheck));
    OSPREY_CHECK(s->run([&]() -> Result<void> {
      s->m_params = OSPREY_TRY(gpt2::upload(s->m_h, weights));
      return {};
    }));
    return std::unique_ptr<Gpt2Session>(std::move(s));
  }

  std::string device() const override { return m_h.device(); }
  const gpt2::Config& config() const override { return m_config; }
  Index optimizerSteps() const override { return m_optimizer ? m_optimizer->step : 0; }

  Result<std::vector<int>> generate(std::span<const int> prompt, Index count,
                                    const gpt2::sampling::SamplingSettings& sampling,
                                    const OnToken& onToken) override {
    OSPREY_CHECK(checkIds(m_config, prompt));
    OSPREY_CHECK(gpt2::checkFitsContext(m_config, static_cast<Index>(prompt.size()), count));
    if (m_generationCheck)
      if (auto problem = m_generationCheck(m_config)) return Error{*problem};
    return run([&]() -> Result<std::vector<int>> {
      const auto& w = OSPREY_TRY(forwardWeights());
      return gpt2::generateTokens(m_h, w.get(), prompt, count, sampling,
                                  [&](int id) -> Result<void> { return onToken(id); });
    });
  }

  Result<std::vector<Scalar>> logits(std::span<const int> ids, bool everyPosition) override {
    const auto T = static_cast<Index>(ids.size());
    OSPREY_CHECK(checkIds(m_config, ids));
    OSPREY_CHECK(gpt2::checkFitsContext(m_config, T, 0));
    return run([&]() -> Result<std::vector<Scalar>> {
      const auto& w = OSPREY_TRY(forwardWeights());
      auto tokens = OSPREY_TRY(gpt2::tokenBuffer(m_h, ids));                          // (T)
      if (everyPosition)
        return gpt2::train::hostValues(m_h, OSPREY_TRY(gpt2::forwardLogits(m_h, w.get(), tokens, 1, T)));  // (T, V)
      const auto step = OSPREY_TRY(gpt2::prefill(m_h, w.get(), tokens, T));
      return gpt2::train::hostValues(m_h, step.logits);                                // (V)
    });
  }

  Result<Scalar> loss(const gpt2::data::Batch& batch) override {
    return run([&] { return gpt2::train::batchLoss(m_h, m_params, batch); });
  }

  Result<StepReport> trainStep(const gpt2::data::Batch& batch, Index microBatch, const gpt2::AdamWSettings& adamw,
                               bool gradSums) override {
    return run([&]() -> Result<StepReport> {
      if (!m_optimizer) m_optimizer = OSPREY_TRY(gpt2::train::freshOptimizer(m_h, m_params));
      auto g = OSPREY_TRY(gpt2::train::batchGradients(m_h, m_params, batch, microBatch));
      const Index step = m_optimizer->step + 1;
      if (!std::isfinite(g.loss))
        return Error{fmt::format("step {}: the loss is {} (try a smaller lr)", step, gpt2::train::shown(g.loss))};
      StepReport report{g.loss, {}, step};
      if (gradSums)
        for (const auto& t : g.grads.tensors) report.gradSums.push_back(OSPREY_TRY(gpt2::sum(m_h, t)));
      auto next = OSPREY_TRY(gpt2::train::adamwStep(m_h, m_params, *m_optimizer, g.grads, adamw));
      if (const auto bad = OSPREY_TRY(gpt2::train::firstNonFiniteTensor(m_h, next.weights)))
        return Error{fmt::format("step {}: the update left NaN or infinity in {} (the gradient or the step of lr "
                                 "{:g} overflowed; try a smaller lr); the weights are those before the step",
                                 step, gpt2::parameterSpecs(m_config)[*bad].name, adamw.lr)};
      m_params = std::move(next.weights);
      m_optimizer = std::move(next.state);
      m_forward.reset();  // made again from the new weights when next asked for
      return report;
    });
  }

  Result<Scalar> validationLoss(std::span<const gpt2::data::TokenId> tokens, Index B, Index T,
                                Index batches) override {
    return run([&]() -> Result<Scalar> {
      auto stream = OSPREY_TRY(gpt2::data::BatchStream::create(tokens, B, T, "validation", "validation"));
      Scalar total = 0.0;  // the loop's sum (gpt2/train/loop.hpp's validationLoss), in batch order
      for (Index k = 0; k < batches; ++k) total = total + OSPREY_TRY(gpt2::train::batchLoss(m_h, m_params, stream.next()));
      return total / static_cast<Scalar>(batches);
    });
  }

  Result<gpt2::HostWeights> hostWeights() override {
    return run([&] { return gpt2::train::hostCopy(m_h, m_params); });
  }

 private:
  Gpt2SessionOn(H handler, const gpt2::Config& config, GenerationCheck generationCheck)
      : m_h(std::move(handler)), m_config(config), m_generationCheck(generationCheck) {}

  // work() strictly, one call at a time, and on a device that queues work, after that work ran.
  template <class Work>
  auto run(Work&& work) -> decltype(strictly(std::forward<Work>(work))) {
    std::lock_guard lock(m_calls);
    auto result = strictly(std::forward<Work>(work));
    if constexpr (requires { m_h.runtime()->flush(); }) {
      if (result.ok())
        if (auto pending = m_h.runtime()->flush(); !pending.ok()) return pending.error();
    }
    return result;
  }

  // The forward pass's layout of the current weights, made on first use.
  Result<std::reference_wrapper<const gpt2::ForwardWeights<H>>> forwardWeights() {
    if (!m_forward) m_forward = OSPREY_TRY(gpt2::prepareForward(m_h, gpt2::train::Params<H>(m_params)));
    return std::cref(*m_forward);
  }

  H m_h;
  gpt2::Config m_config;
  GenerationCheck m_generationCheck;
  gpt2::train::Params<H> m_params;
  std::optional<gpt2::ForwardWeights<H>> m_forward;
  std::optional<gpt2::train::OptimizerState<H>> m_optimizer;
  std::mutex m_calls;
};

}  // namespace osprey::python
