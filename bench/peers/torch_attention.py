#!/usr/bin/env python3
"""PyTorch's attention backends at GPT-2 124M's training shape, the bar for Osprey's flash kernels.

Causal self-attention, B x NH x T x 64 (default 16 x 12 x 1024 x 64), bf16 q, k, v, through
torch.nn.functional.scaled_dot_product_attention with one backend at a time (cuDNN's, which llm.c
uses, and FlashAttention-2's): the forward alone, and the forward plus the backward of
sum(out * dout). Each is checked against the math backend in float32 first (largest |difference|
of out, and of dq, dk, dv, relative to the largest value) and skipped if the backend refuses the
shape. Times: --repeat calls queued back to back between two CUDA events, after --warmup, the
median of five such runs, per call (host time between calls overlaps the device's). Osprey's
kernels' times come from Nsight Compute (bench/cuda/NOTES.md), so compare them as kernel times.
Prints `RESULT|name|unit|value` lines.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, warmup, repeat, rounds=5):
    """Microseconds a call: `repeat` calls queued back to back between two CUDA events (so the
    host's time between calls overlaps the device's), the median of `rounds` such runs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3 / repeat)
    return statistics.median(per_call)


def gap(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--head-size", type=int, default=64)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=50)
    a = p.parse_args()
    torch.manual_seed(0)
    shape = (a.batch, a.heads, a.seq, a.head_size)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    def both(backend, dtype):
        qq, kk, vv = (t.detach().to(dtype).requires_grad_() for t in (q, k, v))
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
        out.backward(dout.to(dtype))
        return out.detach(), qq.grad, kk.grad, vv.grad

    want = both(SDPBackend.MATH, torch.float32)
    flops = 4 * a.batch * a.heads * a.seq * a.seq * a.head_size / 2  # causal: half the scores
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION)):
        try:
            got = both(backend, torch.bfloat16)
        except RuntimeError as e:
            print(f"RESULT|torch sdpa {name}|skipped|{str(e).splitlines()[0][:60]}")
            continue
        worst = max(gap(g, w) for g, w in zip(got, want))
        print(f"RESULT|torch sdpa {name} vs float32 math, worst of out, dq, dk, dv|relative|{worst:.3g}")

        def forward():
            with sdpa_kernel(backend), torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def forward_backward():
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.autograd.grad(out, (q, k, v), dout)

        f = timed(forward, a.warmup, a.repeat)
        fb = timed(forward_backward, a.warmup, a.repeat)
        print(f"RESULT|torch sdpa {name} forward B{a.batch} NH{a.heads} T{a.seq}|us|{f:.1f}")
        print(f"RESULT|torch sdpa {name} forward + backward|us|{fb:.1f}")
        print(f"RESULT|torch sdpa {name} forward TFLOP/s|TFLOP/s|{flops / f / 1e6:.1f}")
        print(f"RESULT|torch sdpa {name} forward + backward TFLOP/s|TFLOP/s|{3.5 * flops / fb / 1e6:.1f}")


if __name__ == "__main__":
    main()
