// Command-line options `train-step` and `train` share: the data and batch shape, and AdamW.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "gpt2/layers/adamw.hpp"
#include "osprey/config.hpp"

namespace gpt2::train {

// --data FILE, --batch B, --seq T, --micro-batch M
inline void addDataOptions(CLI::App& sub, std::string& data, osprey::Index& batch, osprey::Index& seq,
                           osprey::Index& microBatch) {
  sub.add_option("--data", data, "a text file to train on (tokenised once, cached beside it as FILE.osprey-tokens)")
      ->required();
  sub.add_option("--batch", batch, "B: sequences per step")->capture_default_str()->check(CLI::PositiveNumber);
  sub.add_option("--seq", seq, "T: tokens per sequence")->capture_default_str()->check(CLI::PositiveNumber);
  sub.add_option("--micro-batch", microBatch,
                 "rows per micro-batch; the step's gradient is the sum of the micro-batch gradients in "
                 "order (0: the whole batch at once)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

// --lr, --beta1, --beta2, --eps, --weight-decay (PyTorch AdamW's defaults, lr 1e-3, no decay)
inline void addAdamWOptions(CLI::App& sub, AdamWSettings& s) {
  sub.add_option("--lr", s.lr, "AdamW learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  sub.add_option("--beta1", s.beta1, "AdamW beta1")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  sub.add_option("--beta2", s.beta2, "AdamW beta2 (llm.c and GPT-2 recipes use 0.95)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub.add_option("--eps", s.eps, "AdamW epsilon")->capture_default_str()->check(CLI::PositiveNumber);
  sub.add_option("--weight-decay", s.weightDecay, "AdamW decoupled weight decay (2-D tensors only)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

}  // namespace gpt2::train
