// GPT-2's training step, written once against the Tensor effect: the forward that keeps its
// activations (forward.hpp: the model's one forward walk), the mean cross-entropy loss, the
// backward through every layer in reverse, and the gradient of a global batch as a fixed-order
// sum of micro-batch gradients.
//
// Dimension legend: config.hpp (maxT, V, L, NH, C) and layers/common.hpp (B, T, N = B·T).
//
// Backward, in reverse, each layer's gradients from layers/*.hpp. Where one tensor receives two
// contributions they are added once, element-wise, in a fixed documented order:
//   * residual streams: dx = d(residual path) + d(branch through the LayerNorm)
//   * the tied embedding: dwte = d(lm head) + d(token embedding)
// (two-term IEEE sums are commutative, so these are exact whichever way round; the order is
// still stated so a reader can follow every addition).
//
// Global batches and micro-batches (exact gradient accumulation and data parallelism):
// a global batch of B rows is cut into micro-batches of M rows (rows [k·M, (k+1)·M), k = 0..B/M-1).
// The loss is the mean over the global batch's B·T tokens, so micro-batch k contributes
//   lossSum_k = sum of its M·T token losses (row order, from 0.0)
//   grad_k    = d(lossSum_k / (B·T)) / dw     (cross-entropy backward with dloss = 1/(B·T))
// and the step's values are left folds in micro-batch order:
//   grad = ((grad_0 + grad_1) + grad_2) + ...,   loss = (((lossSum_0 + lossSum_1) + ...) / (B·T)
// Whoever computes the grad_k (one process in a loop, or several devices each holding some k)
// gets the same doubles as long as it folds them in k order. With M = B (the default) there is
// one micro-batch and no fold.
//
// No line here names a handler or a device; kernels live in named templates with explicit
// return types (DESIGN.md §3, CUDA notes).
#pragma once

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpt2/layers/layers.hpp"
#include "gpt2/model/weights.hpp"
#include "gpt2/train/clock.hpp"
#include "gpt2/train/data_batches.hpp"
#include "gpt2/train/forward.hpp"

namespace gpt2::train {

using osprey::Index;
using osprey::Scalar;

// One micro-batch's share of a step.
template <osprey::Tensor H>
struct MicroBatchGradients {
  Scalar lossSum = 0.0;  // sum of the micro-batch's token losses, row order from 0.0
  Params<H> grads;       // d(lossSum / (global B·T)) / dw, one tensor per parameter
};

// A whole step's loss and gradient.
template <osprey::Tensor H>
struct StepGradients {
  Scalar loss = 0.0;  // mean token loss over the global batch
  Params<H> grads;
};

// Gradients of every parameter from a forward pass, for the loss sum(losses) * dloss.
template <osprey::Tensor H>
osprey::Result<Params<H>> backward(H& h, const Params<H>& w, const ForwardPass<H>& f, Scalar dloss,
                                   LayerClock* clock = nullptr) {
  const Laps lap(clock);
  const Config& c = w.config;
  const Index B = f.B, T = f.T, C = c.C, V = c.V, N = B * T;
  Params<H> g{c, std::vector<Buf<H>>(static_cast<std::size_t>(parameterTensorCount(c)))};
  auto put = [&](Index index, Buf<H> grad) { g.tensors[static_cast<std::size_t>(index)] = std::move(grad); };
  auto putBlock = [&](Index l, BlockSlot slot, Buf<H> grad) { put(blockTensorIndex(l, slot), std::move(grad)); };

  // dlogits (N, V), then head.dx (N, C) and head.dwt (V, C): the lm head's share of dwte
  auto head = OSPREY_TRY(headLossBackward(h, f.ce.probs, f.targets, f.lnf.out, w.wte(), N, C, V, dloss));
  lap("backward cross-entropy and lm head");
  auto lnf = OSPREY_TRY(layernormBackward(h, head.dx, f.output, w.lnfWeight(), f.lnf.mean,
                                          f.lnf.rstd, N, C));                        // (N, C)
  lap("backward layernorm");
  put(lnfWeightIndex(c), std::move(lnf.dw));
  put(lnfBiasIndex(c), std::move(lnf.db));

  Buf<H> dx = std::move(lnf.dx);  // (N, C) gradient of the residual stream
  for (Index l = c.L - 1; l >= 0; --l) {
    const BlockActivations<H>& a = f.blocks[static_cast<std::size_t>(l)];
    // MLP branch: x' = r + (gelu(ln_2(r)·c_fc + b)·c_proj + b)
    auto proj = OSPREY_TRY(geluMatmulBackward(h, dx, a.fcGelu, w.block(l, BlockSlot::FcProjWeight), a.fc,
                                              N, 4 * C, C));                         // df (N, 4C)
    lap("backward matmul fc proj + gelu");
    auto fc = OSPREY_TRY(matmulBackward(h, proj.df, a.ln2.out, w.block(l, BlockSlot::FcWeight),
                                        N, C, 4 * C));                               // dx (N, C)
    lap("backward matmul fc");
    // dr = dx + ln_2's dx: the residual path and the MLP branch                      (N, C)
    auto ln2 = OSPREY_TRY(residualLayernormBackward(h, dx, fc.dx, a.residual, w.block(l, BlockSlot::Ln2Weight),
                                                    a.ln2.mean, a.ln2.rstd, N, C));
    lap("backward layernorm + residual");
    const Buf<H>& dr = ln2.dx;
    // Attention branch: r = x + (attention(ln_1(x)·c_attn + b)·c_proj + b)
    auto aproj = OSPREY_TRY(matmulBackward(h, dr, a.attn.out, w.block(l, BlockSlot::AttnProjWeight),
                                           N, C, C));                                // dx (N, C)
    lap("backward matmul attn proj");
    auto dqkv = OSPREY_TRY(attentionBackward(h, aproj.dx, a.qkv, a.attn.att, B, T, C, c.NH)); // (N, 3C)
    lap("backward attention");
    auto qkv = OSPREY_TRY(matmulBackward(h, dqkv, a.ln1.out, w.block(l, BlockSlot::AttnWeight),
                                         N, C, 3 * C));                              // dx (N, C)
    lap("backward matmul qkv");
    // dx = dr + ln_1's dx: the residual path and the attention branch                 (N, C)
    auto ln1 = OSPREY_TRY(residualLayernormBackward(h, dr, qkv.dx, a.input, w.block(l, BlockSlot::Ln1Weight),
                                                    a.ln1.mean, a.ln1.rstd, N, C));
    lap("backward layernorm + residual");
    dx = ln1.dx;

    putBlock(l, BlockSlot::Ln1Weight, std::move(ln1.dw));
    putBlock(l, BlockSlot::Ln1Bias, std::move(ln1.db));
    putBlock(l, BlockSlot::AttnWeight, std::move(qkv.dw));
    putBlock(l, BlockSlot::AttnBias, std::move(qkv.dbias));
    putBlock(l, BlockSlot::AttnProjWeight, std::move(aproj.dw));
    putBlock(l, BlockSlot::AttnProjBias, std::move(aproj.dbias));
    putBlock(l, BlockSlot::Ln2Weight, std::move(ln2.dw));
    putBlock(l, BlockSlot::Ln2Bias, std::move(ln2.db));
    putBlock(l, BlockSlot::FcWeight, std::move(fc.dw));
    putBlock(l, BlockSlot::FcBias, std::move(fc.dbias));
    putBlock(l, BlockSlot::FcProjWeight, std::move(proj.dw));
    putBlock(l, BlockSlot::FcProjBias, std::move(proj.dbias));
  }
  // Tied embedding: dwte = lm head's share + token embedding's share, added element-wise in that
  // order (encoderBackwardOnto is bit for bit add(head.dwt, encoderBackward(...).dwte), one pass
  // over the (V, C) table cheaper).
  auto enc = OSPREY_TRY(encoderBackwardOnto(h, head.dwt, dx, f.tokens, N, T, C, V, c.maxT, 0));  // (V, C), (maxT, C)
  lap("backward encoder + tied embedding sum");
  put(kWteIndex, std::move(enc.dwte));
  put(kWpeIndex, std::move(enc.dwpe));
  return g;
}

// The sum of a micro-batch's token losses, row order from 0.0, as a one-element buffer: left on
// the device, so that reading it can wait until the backward is queued behind it (a device that
// queues launches without waiting then runs the backward's first kernels while the host is still
// queueing the rest, where a read straight after the forward left it idle meanwhile). A row fold:
// the exact handlers' is the in-order fold sum() takes, bit for bit (one term table, the same
// additions); the fast handler's a tree over one block.
template <osprey::Tensor H>
osprey::Result<Buf<H>> lossSumOf(H& h, const Buf<H>& losses) {
  const auto v = losses.view();
  return sumRows(
      h, 1, h.length(losses), [=] OSPREY_FN(KernelIndex<H>, KernelIndex<H> c) -> KernelScalar<H> { return v[c]; },
      [] OSPREY_FN(KernelIndex<H>, KernelScalar<H> total) -> KernelScalar<H> { return total; });
}

// One micro-batch of a global batch of `globalRows` rows: its loss sum and its share of the
// gradient of the global mean loss.
template <osprey::Tensor H>
osprey::Result<MicroBatchGradients<H>> microBatchGradients(H& h, const Params<H>& w,
                                                           const data::Batch& micro, Index globalRows,
                                                           LayerClock* clock = nullptr) {
  if (globalRows < micro.B)
    return osprey::Error{fmt::format("a micro-batch of {} rows cannot belong to a batch of {}", micro.B, globalRows)};
  auto f = OSPREY_TRY(forwardForTraining(h, w, micro, clock));
  const Scalar tokens = static_cast<Scalar>(globalRows) * static_cast<Scalar>(micro.T);
  MicroBatchGradients<H> out;
  const auto lossSum = OSPREY_TRY(lossSumOf(h, f.ce.losses));
  out.grads = OSPREY_TRY(backward(h, w, f, 1.0 / tokens, clock));
  out.lossSum = h.get(lossSum, 0);  // read once the backward is queued behind it
  return out;
}

// into = into + next, tensor by tensor (the fold step of the micro-batch sum).
template <osprey::Tensor H>
osprey::Result<Params<H>> addGradients(H& h, const Params<H>& into, const Params<H>& next) {
  if (into.tensors.size() != next.tensors.size())
    return osprey::Error{fmt::format("adding gradients of {} and {} tensors", into.tensors.size(),
                                     next.tensors.size())};
  Params<H> out{into.config, {}};
  out.tensors.reserve(into.tensors.size());
  for (std::size_t i = 0; i < into.tensors.size(); ++i)
    out.tensors.push_back(OSPREY_TRY(add(h, into.tensors[i], next.tensors[i])));
  return out;
}

// The running fold of micro-batch results in micro-batch order (see the file comment): the first
// term is taken as it is, each later one added, loss sum and tensors alike. Every way of computing
// a step (one process, or ranks exchanging their terms) folds through this one function.
template <osprey::Tensor H>
struct GradientFold {
  Scalar lossSum = 0.0;
  Params<H> grads;  // no tensors until the first term

  osprey::Result<void> add(H& h, MicroBatchGradients<H> part) {
    if (grads.tensors.empty()) {
      lossSum = part.lossSum;
      grads = std::move(part.grads);
    } else {
      lossSum = lossSum + part.lossSum;
      grads = OSPREY_TRY(addGradients(h, grads, part.grads));
    }
    return {};
  }

  StepGradients<H> finish(Index B, Index T) {
    const Scalar tokens = static_cast<Scalar>(B) * static_cast<Scalar>(T);
    return StepGradients<H>{lossSum / tokens, std::move(grads)};
  }
};

// The loss and gradient of a global batch, cut into micro-batches of `microRows` rows
// (0 = the whole batch at once), folded in micro-batch order (see the file comment).
template <osprey::Tensor H>
osprey::Result<StepGradients<H>> batchGradients(H& h, const Params<H>& w, const data::Batch& batch,
                                                Index microRows, LayerClock* clock = nullptr) {
  const Index M = microRows == 0 ? batch.B : microRows;
  if (M < 1 || batch.B % M != 0)
    return osprey::Error{fmt::format("--micro-batch {} must divide --batch {}", microRows, batch.B)};
  GradientFold<H> fold;
  for (Index k = 0; k < batch.B / M; ++k) {
    auto part = OSPREY_TRY(microBatchGradients(h, w, data::batchRows(batch, k * M, M), batch.B, clock));
    OSPREY_CHECK(fold.add(h, std::move(part)));
  }
  return fold.finish(batch.B, batch.T);
}

// Reads one element of b: a device that queues launches without waiting (the cuda device) has
// then finished everything queued before, so a clock read next measures work really done.
template <osprey::Tensor H>
void waitForDevice(H& h, const Buf<H>& b) {
  if (h.length(b) > 0) (void)h.get(b, 0);
}

// The mean token loss of a batch: the training forward's loss, without the backward.
template <osprey::Tensor H>
osprey::Result<Scalar> batchLoss(H& h, const Params<H>& w, const data::Batch& batch) {
  auto f = OSPREY_TRY(forwardForTraining(h, w, batch));
  const Scalar lossSum = h.get(OSPREY_TRY(lossSumOf(h, f.ce.losses)), 0);
  return lossSum / (static_cast<Scalar>(batch.B) * static_cast<Scalar>(batch.T));
}

}  // namespace gpt2::train
