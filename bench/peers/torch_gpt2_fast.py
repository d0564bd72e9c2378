#!/usr/bin/env python3
"""PyTorch peers for Osprey's fast handler, measured in the same device run (issue: fast handler).

  train: one GPT-2 training step (forward, backward, AdamW) at B x T (default 16 x 1024) in three
         configurations: fp32 eager, bf16 autocast eager, bf16 autocast + torch.compile. --size
         picks the model (124M, the default, 350M, 774M or 1558M: Hugging Face's gpt2 ...
         gpt2-xl shapes); --only runs one configuration and no decoding, the form a sweep over
         sizes needs (scripts/gpu-check.d/37-sizes.sh: --only compile).
         The median of --repeat timed steps after warm-up, torch.cuda.synchronize around each;
         tokens/s and peak memory (torch.cuda.max_memory_allocated) for each.
  decode: batch-1 greedy decoding of 124M with transformers' generate (KV cache on), fp32 and
         bf16: tokens per second over --tokens new tokens after a warm-up.

TF32 is left at PyTorch's default (off for matmuls) in fp32 eager: that is the "fp32 eager" bar the
issue quotes. The model is GPT2LMHeadModel from a config (random weights: speed does not depend on
the values), SDPA attention, dropout off. Prints `RESULT|name|unit|value` lines; where the compiled
configuration (or the one --only names) fails, a FAIL row names the exception (a compiler error,
`OutOfMemoryError: ...`: what a caller retries at a smaller batch) and the script goes on.
"""
import argparse
import statistics
import time

import torch

from gpt2_peer import SIZES, decode, model_of


def train(name, size, B, T, repeat, autocast, compile_it):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = model_of(size, torch.float32).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0, fused=True)
    x = torch.randint(0, 50257, (B, T), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if compile_it:
        step = torch.compile(step)
    times = []
    warmup = 3 if compile_it else 2
    for i in range(repeat + warmup):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    print(f"RESULT|torch {name} train step B{B} T{T}|ms|{ms:.2f}")
    print(f"RESULT|torch {name} train tokens/s|tok/s|{B * T / (ms / 1e3):.0f}")
    print(f"RESULT|torch {name} train peak memory|GiB|{torch.cuda.max_memory_allocated() / 2**30:.2f}")
    del model, opt


def train_reported(name, a, autocast, compile_it):
    """train(), with a failure (a compiler error, running out of memory) as a FAIL row."""
    try:
        train(name, a.size, a.batch, a.seq, a.repeat, autocast=autocast, compile_it=compile_it)
    except Exception as e:
        print(f"RESULT|torch {name} train step B{a.batch} T{a.seq}|FAIL|{type(e).__name__}: {e}"[:300])
        torch.cuda.empty_cache()


CONFIGS = {  # --only's names: (the name rows carry, autocast, compile)
    "fp32": ("fp32 eager", False, False),
    "autocast": ("bf16 autocast", True, False),
    "compile": ("bf16 autocast + compile", True, True),
}

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--size", choices=list(SIZES), default="124M")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--prompt-len", type=int, default=5)
    p.add_argument("--skip-compile", action="store_true")
    p.add_argument("--only", choices=list(CONFIGS), help="this training configuration alone, no decoding")
    a = p.parse_args()
    if a.only:
        name, autocast, compile_it = CONFIGS[a.only]
        train_reported(name, a, autocast=autocast, compile_it=compile_it)
    else:
        train("fp32 eager", a.size, a.batch, a.seq, a.repeat, autocast=False, compile_it=False)
        train("bf16 autocast", a.size, a.batch, a.seq, a.repeat, autocast=True, compile_it=False)
        if not a.skip_compile:
            train_reported("bf16 autocast + compile", a, autocast=True, compile_it=True)
        decode("fp32", torch.float32, a.tokens, a.prompt_len)
        decode("bf16", torch.bfloat16, a.tokens, a.prompt_len)
