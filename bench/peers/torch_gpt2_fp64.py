#!/usr/bin/env python3
"""PyTorch peers for Osprey's exact GPT-2 on CUDA, measured in the same device run.

  train: one GPT-2 training step (forward, backward, AdamW) in float64 at B x T, the median of
         --repeat timed steps after a warm-up, with torch.cuda.synchronize around each; --size
         picks the model (124M, the default, 350M, 774M or 1558M).
  decode: batch-1 greedy decoding of 124M with transformers' generate (KV cache on) in float64:
         tokens per second over --tokens new tokens after a warm-up (--skip-decode: none).

Neither is bit-identical to anything (cuBLAS DGEMM fuses multiply-add and reorders sums); they
are the speed bar. The model is GPT2LMHeadModel from a config (random weights: speed does not
depend on the values), eager attention, dropout off. Prints `RESULT|name|unit|value` lines.
"""
import argparse
import statistics
import time

import torch

from gpt2_peer import SIZES, decode, model_of


def train(size, B, T, repeat):
    model = model_of(size, torch.float64).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    x = torch.randint(0, 50257, (B, T + 1), device="cuda")
    times = []
    for i in range(repeat + 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(x[:, :T], labels=x[:, :T]).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    print(f"RESULT|torch fp64 train step B{B} T{T}|ms|{ms:.1f}")
    print(f"RESULT|torch fp64 train peak memory|GiB|{torch.cuda.max_memory_allocated() / 2**30:.2f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--size", choices=list(SIZES), default="124M")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--prompt-len", type=int, default=5)
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--skip-decode", action="store_true")
    a = p.parse_args()
    if not a.skip_train:
        train(a.size, a.batch, a.seq, a.repeat)
    if not a.skip_decode:
        decode("fp64", torch.float64, a.tokens, a.prompt_len)
