"""What the PyTorch peer scripts share: GPT-2 of each released size from a config, and batch-1
greedy decoding timed with transformers' generate. Random weights: speed does not depend on the
values."""
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

# n_layer, n_head, n_embd of Hugging Face's config.json for gpt2, gpt2-medium, gpt2-large and
# gpt2-xl (n_positions 1024, vocab_size 50257 in each), named as Osprey's presets are.
SIZES = {
    "124M": (12, 12, 768),
    "350M": (24, 16, 1024),
    "774M": (36, 20, 1280),
    "1558M": (48, 25, 1600),
}


def model_of(size, dtype):
    n_layer, n_head, n_embd = SIZES[size]
    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=1024, vocab_size=50257,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    return GPT2LMHeadModel(config).to(device="cuda", dtype=dtype)


def model_124m(dtype):
    return model_of("124M", dtype)


@torch.no_grad()
def decode(name, dtype, tokens, prompt_len):
    """Prints the tokens/s of `tokens` new tokens after a `prompt_len`-token prompt (KV cache on),
    after a warm-up, and the peak memory."""
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = model_124m(dtype).eval()
    ids = torch.randint(0, 50257, (1, prompt_len), device="cuda")
    model.generate(ids, max_new_tokens=8, do_sample=False, min_new_tokens=8, pad_token_id=0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"RESULT|torch {name} generate batch 1 ({tokens} tokens)|tok/s|{tokens / dt:.1f}")
    print(f"RESULT|torch {name} generate peak memory|GiB|{torch.cuda.max_memory_allocated() / 2**30:.2f}")
    del model
