// GPT-2 held on one handler for a Python program's lifetime: the weights uploaded once, then
// generation, logits, losses and training steps on demand. Each call runs the model's own
// functions (gpt2/model/, gpt2/train/) in the order the CLI's jobs run them (gpt2/cli/run_job.hpp,
// gpt2/train/step_job.hpp, gpt2/train/loop.hpp), so the exact handlers give the CLI's bits.
//
// The handler is chosen once, by osprey::chooseBackend (openGpt2Session), with the CLI's errors.
// The model is compiled for lists and gpu/host in one translation unit (gpt2_host_sessions.cpp),
// where nvcc builds the module for gpu/cuda and fast in another (gpt2_cuda_sessions.cu), and where
// the build has OpenCL for gpu/opencl in a third (gpt2_opencl_sessions.cpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpt2/layers/adamw.hpp"
#include "gpt2/model/weights.hpp"
#include "gpt2/sampling/sampling.hpp"
#include "gpt2/train/data_batches.hpp"
#include "osprey/result.hpp"

namespace osprey::python {

// What a training step reports.
struct StepReport {
  Scalar loss = 0.0;              // the batch's mean token loss before the update
  std::vector<Scalar> gradSums;   // each gradient tensor's left-fold sum, in parameterSpecs order (if asked)
  Index step = 0;                 // updates applied so far, this one included
};

class Gpt2Session {
 public:
  virtual ~Gpt2Session() = default;

  // "lists", "host", "cuda: NVIDIA H200", "opencl: pocl cpu", "fast cuda: ...": the CLI's
  // `gpt2 (...) on <device>`.
  virtual std::string device() const = 0;
  virtual const gpt2::Config& config() const = 0;

  // The continuation of `prompt` by `count` tokens (generateTokens: greedy at temperature 0, else
  // sampled); onToken sees each as it is chosen, and an Error from it stops generation.
  using OnToken = std::function<Result<void>(int)>;
  virtual Result<std::vector<int>> generate(std::span<const int> prompt, Index count,
                                            const gpt2::sampling::SamplingSettings& sampling,
                                            const OnToken& onToken) = 0;

  // The logits of `ids` (one sequence): the last position's V (prefill, as `osprey-gpt2 logits`),
  // or every position's T x V, row-major.
  virtual Result<std::vector<Scalar>> logits(std::span<const int> ids, bool everyPosition) = 0;

  // The mean token loss of a batch with the current weights.
  virtual Result<Scalar> loss(const gpt2::data::Batch& batch) = 0;

  // One training step on the session's weights with its AdamW state (fresh zeros before the first
  // step): batchGradients, then adamwStep. A loss or an update that is not finite is an Error, and
  // the weights and state stay those before the step.
  virtual Result<StepReport> trainStep(const gpt2::data::Batch& batch, Index microBatch,
                                       const gpt2::AdamWSettings& adamw, bool gradSums) = 0;

  // The training loop's validation loss: the mean batch loss of the first `batches` batches of
  // B x T over `tokens`.
  virtual Result<Scalar> validationLoss(std::span<const gpt2::data::TokenId> tokens, Index B, Index T,
                                        Index batches) = 0;

  // The weights, back on the host (to save them).
  virtual Result<gpt2::HostWeights> hostWeights() = 0;

  // How many AdamW updates the weights have had.
  virtual Index optimizerSteps() const = 0;
};

// Which handler: the CLI's --backend, --device and --products.
struct SessionChoice {
  std::string backend = "lists";
  std::string device;    // gpu only; empty: OSPREY_GPU, else host
  std::string products;  // fast only; empty: bf16
};

// Whether `choice` names a handler this module has (the CLI's refusals), before any model is read.
Result<void> checkSessionChoice(const SessionChoice& choice);

// The weights on the handler `choice` names, or the CLI's error for a bad or unavailable choice.
Result<std::unique_ptr<Gpt2Session>> openGpt2Session(const SessionChoice& choice, const gpt2::HostWeights& weights);

// One entry per handler (gpt2_host_sessions.cpp; gpt2_cuda_sessions.cu or cuda_absent.cpp;
// gpt2_opencl_sessions.cpp or opencl_absent.cpp).
Result<std::unique_ptr<Gpt2Session>> openListsSession(const gpt2::HostWeights& weights);
Result<std::unique_ptr<Gpt2Session>> openGpuHostSession(const gpt2::HostWeights& weights);
Result<std::unique_ptr<Gpt2Session>> openGpuCudaSession(const gpt2::HostWeights& weights);
Result<std::unique_ptr<Gpt2Session>> openGpuOpenClSession(const gpt2::HostWeights& weights);
Result<std::unique_ptr<Gpt2Session>> openFastSession(const gpt2::HostWeights& weights, bool tf32Products);

}  // namespace osprey::python
