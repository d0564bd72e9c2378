#!/usr/bin/env python3
"""Writes the generated seed corpora of the fuzz targets (fuzz/corpus/<target>/).

    fuzz/make-seeds.py            rewrites llmc_checkpoint/, llmc_shard/, hf_config/, training_data/,
                                  trainer_state/

Each corpus holds a few valid inputs and a few damaged ones, all small. The seeds are committed;
run this again only to change them (safetensors/ and tokenizer/ are kept by hand). Inputs a
fuzzer found that are kept for replay are named <corpus>-<what they hold>
(training_data-mtime-beyond-int64.json) and survive a rewrite.
The training_data seeds are caches for the fixed text of fuzz/training_data_fuzz.cpp: TEXT,
TOKENIZER_DIGEST and MTIME_NS below must stay equal to kText, kTokenizerDigest and the mtime there.
"""
import hashlib
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def reset(name):
    """Empties corpus/<name>/ of generated seeds; inputs a fuzzer found, named <name>-*, stay."""
    path = os.path.join(CORPUS, name)
    os.makedirs(path, exist_ok=True)
    for entry in os.listdir(path):
        if not entry.startswith(name + "-"):
            full = os.path.join(path, entry)
            shutil.rmtree(full) if os.path.isdir(full) else os.remove(full)
    return path


def write(folder, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data)


# --- llm.c checkpoints -------------------------------------------------------------------------
LLMC_MAGIC = 20240326


def llmc_params(maxT, V, L, NH, C, Vp):
    return Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C


def llmc_header(magic, version, maxT, V, L, NH, C, Vp):
    ints = [magic, version, maxT, V, L, NH, C, Vp] + [0] * 248
    return struct.pack("<256i", *ints)


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def bf16(values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def llmc(version, dims, special=()):
    n = llmc_params(*dims)
    values = [((k * 37) % 17 - 8) * 0.125 for k in range(n)]
    for k, v in special:
        values[k] = v
    body = f32(values) if version == 3 else bf16(values)
    return llmc_header(LLMC_MAGIC, version, *dims) + body


def llmc_seeds():
    d = reset("llmc_checkpoint")
    tiny = llmc(3, (1, 1, 1, 1, 1, 1), special=[(0, float("inf")), (1, float("nan")), (2, -0.0)])
    write(d, "f32-one-of-everything.bin", tiny)
    write(d, "f32-two-layers.bin", llmc(3, (2, 2, 2, 1, 2, 2)))
    write(d, "bf16-padded-vocab.bin", llmc(5, (2, 3, 1, 2, 2, 4)))
    write(d, "f32-padded-vocab.bin", llmc(3, (3, 2, 1, 2, 4, 8)))
    # Damaged.
    write(d, "bad-truncated.bin", tiny[:-1])
    write(d, "bad-one-byte-extra.bin", tiny + b"\0")
    write(d, "bad-magic.bin", llmc_header(20240327, 3, 1, 1, 1, 1, 1, 1) + tiny[1024:])
    write(d, "bad-version-4.bin", llmc_header(LLMC_MAGIC, 4, 1, 1, 1, 1, 1, 1) + tiny[1024:])
    write(d, "bad-vp-below-v.bin", llmc_header(LLMC_MAGIC, 3, 1, 2, 1, 1, 1, 1) + tiny[1024:])
    write(d, "bad-heads-do-not-divide.bin", llmc_header(LLMC_MAGIC, 3, 1, 1, 1, 2, 3, 1))
    write(d, "bad-zero-layers.bin", llmc_header(LLMC_MAGIC, 3, 1, 1, 0, 1, 1, 1))
    write(d, "bad-negative-context.bin", llmc_header(LLMC_MAGIC, 3, -1, 1, 1, 1, 1, 1))
    write(d, "bad-huge-shapes.bin", llmc_header(LLMC_MAGIC, 5, 1 << 20, 1 << 24, 4096, 1, 1 << 16, 1 << 25))
    write(d, "bad-header-only.bin", llmc_header(LLMC_MAGIC, 3, 1024, 50257, 12, 12, 768, 50304))
    write(d, "bad-short-header.bin", llmc_header(LLMC_MAGIC, 3, 1, 1, 1, 1, 1, 1)[:32])
    write(d, "bad-empty.bin", b"")


# --- llm.c token shards --------------------------------------------------------------------------
SHARD_MAGIC = 20240520


def shard_header(count, magic=SHARD_MAGIC, version=1, rest=()):
    ints = [magic, version, count] + list(rest) + [0] * (253 - len(rest))
    return struct.pack("<256i", *ints)


def shard(tokens, **header):
    return shard_header(len(tokens), **header) + struct.pack("<%dH" % len(tokens), *tokens)


def shard_seeds():
    d = reset("llmc_shard")
    # "First Citizen:\nBefore we proceed any further, hear me speak.\n" in GPT-2's tokens, then <|endoftext|>.
    words = [5962, 22307, 25, 198, 8421, 356, 5120, 597, 2252, 11, 3285, 502, 2740, 13, 198, 50256]
    write(d, "valid-gpt2.bin", shard(words))
    write(d, "valid-one-token.bin", shard([0]))
    write(d, "valid-small-vocab.bin", shard(list(range(0, 300, 7))))
    write(d, "valid-header-tail-set.bin", shard([1, 2, 3], rest=[7, -1]))
    # Damaged: each refused, naming the file.
    write(d, "bad-token-50257.bin", shard([1, 50257, 2]))
    write(d, "bad-token-65535.bin", shard([65535]))
    write(d, "bad-truncated.bin", shard(words)[:-2])
    write(d, "bad-odd-byte.bin", shard(words) + b"\0")
    write(d, "bad-trailing-token.bin", shard(words) + b"\1\0")
    write(d, "bad-count-zero.bin", shard_header(0))
    write(d, "bad-count-negative.bin", shard_header(-1) + b"\1\0")
    write(d, "bad-count-huge.bin", shard_header(0x7FFFFFFF) + b"\1\0")
    write(d, "bad-version-2.bin", shard(words, version=2))
    write(d, "bad-magic-checkpoint.bin", shard(words, magic=20240326))
    write(d, "bad-header-only-magic.bin", struct.pack("<i", SHARD_MAGIC))
    write(d, "bad-short-header.bin", shard_header(1)[:512])
    # Token sections alone: the target writes the header (version 1, the count their bytes give).
    write(d, "framed-gpt2.tokens", struct.pack("<%dH" % len(words), *words))
    write(d, "framed-odd.tokens", b"\x01\x00\x02")
    write(d, "framed-empty.tokens", b"")
    write(d, "framed-bad-vocab.tokens", struct.pack("<3H", 299, 300, 50256))


# --- config.json -------------------------------------------------------------------------------
GPT2_124M = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}


def config_seeds():
    d = reset("hf_config")

    def cfg(name, **changes):
        c = dict(GPT2_124M)
        for key, value in changes.items():
            if value is KeyError:
                c.pop(key, None)
            else:
                c[key] = value
        write(d, name, json.dumps(c, indent=2) + "\n")

    cfg("gpt2-124m.json")
    cfg("tiny-n_ctx-only.json", n_positions=KeyError, n_ctx=8, n_embd=4, n_head=2, n_layer=1, vocab_size=5,
        n_inner=16, tie_word_embeddings=True, scale_attn_weights=True, add_cross_attention=False,
        scale_attn_by_inverse_layer_idx=False, activation_function="gelu_pytorch_tanh")
    write(d, "minimal.json", '{"n_positions":1,"vocab_size":1,"n_layer":1,"n_head":1,"n_embd":1}')
    # Damaged, or not Osprey's GPT-2.
    cfg("bad-eps.json", layer_norm_epsilon=1e-6)
    cfg("bad-activation.json", activation_function="relu")
    cfg("bad-model-type.json", model_type="gptj")
    cfg("bad-n_inner.json", n_inner=3000)
    cfg("bad-untied.json", tie_word_embeddings=False)
    cfg("bad-heads.json", n_head=7)
    cfg("bad-float-layers.json", n_layer=12.0)
    cfg("bad-string-width.json", n_embd="768")
    cfg("bad-missing-vocab.json", vocab_size=KeyError)
    cfg("bad-huge-context.json", n_positions=18446744073709551615, n_ctx=KeyError)
    write(d, "bad-out-of-range.json", '{"n_positions":1e400,"vocab_size":1,"n_layer":1,"n_head":1,"n_embd":1}')
    write(d, "bad-array.json", '[{"n_positions":1}]')
    write(d, "bad-truncated.json", json.dumps(GPT2_124M)[:100])
    write(d, "bad-empty.json", "")
    # Keys given twice (json.dumps cannot write them): at the top, nested, and escaped.
    minimal = '"n_positions":1,"vocab_size":1,"n_layer":1,"n_head":1,"n_embd":1'
    write(d, "bad-duplicate-key.json", '{' + minimal + ',"n_layer":2}')
    write(d, "bad-duplicate-nested.json", '{' + minimal + ',"task_specific_params":{"a":{"k":1,"k":2}}}')
    write(d, "bad-duplicate-escaped.json", '{' + minimal + ',"n_\\u006cayer":1}')


# --- the tokenised-data cache ------------------------------------------------------------------
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
TOKENIZER_DIGEST = "fuzz-tokenizer"
MTIME_NS = 1700000000 * 1000000000 + 123456789


def cache(tokens, header=None, magic=b"OSPRTOK1", length=None, tail=b""):
    if header is None:
        header = {"data_size": len(TEXT.encode()), "data_mtime_ns": MTIME_NS,
                  "data_sha256": hashlib.sha256(TEXT.encode()).hexdigest(), "tokenizer": TOKENIZER_DIGEST,
                  "count": len(tokens)}
    text = header if isinstance(header, bytes) else json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    size = len(text) if length is None else length
    return magic + struct.pack("<Q", size) + text + struct.pack("<%dI" % len(tokens), *tokens) + tail


def training_data_seeds():
    d = reset("training_data")
    text = TEXT.encode()
    key = {"data_size": len(text), "data_mtime_ns": MTIME_NS, "data_sha256": hashlib.sha256(text).hexdigest(),
           "tokenizer": TOKENIZER_DIGEST}
    write(d, "valid-bytes.tok", cache(list(text)))
    write(d, "valid-gpt2-ids.tok", cache([5962, 22307, 25, 198, 8421, 356, 5120, 597, 2252, 11, 3285, 502, 2740,
                                          13, 198, 50256] * 3))
    write(d, "valid-empty.tok", cache([]))
    write(d, "valid-most.tok", cache([0x7FFFFFFF, 0] * ((len(text) * 4 + 16) // 2)))
    # Damaged or stale: all refused (the cache is rebuilt).
    write(d, "bad-magic.tok", cache(list(text), magic=b"OSPRTOK2"))
    write(d, "bad-stale-sha.tok", cache(list(text), header=dict(key, data_sha256="0" * 64, count=len(text))))
    write(d, "bad-stale-mtime.tok", cache(list(text), header=dict(key, data_mtime_ns=MTIME_NS + 1, count=len(text))))
    write(d, "bad-other-tokenizer.tok", cache(list(text), header=dict(key, tokenizer="x", count=len(text))))
    write(d, "bad-truncated.tok", cache(list(text))[:-3])
    write(d, "bad-trailing-byte.tok", cache(list(text), tail=b"\0"))
    write(d, "bad-count-too-large.tok", cache([1] * 4, header=dict(key, count=len(text) * 4 + 17)))
    write(d, "bad-count-string.tok", cache([1], header=dict(key, count="1")))
    write(d, "bad-id-negative.tok", cache([1, 0x80000000, 2]))
    write(d, "bad-header-array.tok", cache([], header=b"[1,2,3]"))
    write(d, "bad-header-too-long.tok", cache([], length=1 << 17))
    write(d, "bad-header-past-end.tok", cache([], length=4096))
    write(d, "bad-short.tok", b"OSPRTOK1")
    # Header-only inputs: the target frames them (magic and length) itself; after a NUL, the ids.
    def framed(header, tokens):
        return json.dumps(header, sort_keys=True).encode() + b"\0" + struct.pack("<%dI" % len(tokens), *tokens)
    write(d, "framed-valid-bytes.json", framed(dict(key, count=len(text)), list(text)))
    write(d, "framed-valid-empty.json", framed(dict(key, count=0), []))
    write(d, "framed-bad-count-short.json", framed(dict(key, count=3), [1, 2]))
    write(d, "framed-bad-negative-size.json", framed(dict(key, data_size=-61, count=0), []))
    write(d, "framed-bad-missing-count.json", framed(key, []))
    write(d, "framed-bad-not-json.json", b"{\"data_size\": 61,")
    write(d, "framed-bad-duplicate-count.json",
          b"{\"count\":0," + framed(dict(key, count=len(text)), list(text))[1:])


# --- trainer_state.json ------------------------------------------------------------------------
STATE = {
    "format": "osprey-gpt2-train 1",
    "step": 120,
    "data": {"path": "data/tinyshakespeare.txt", "sha256": "ab" * 32, "tokens": 338025, "position": 4096,
             "epoch": 1},
    "batch": {"batch": 4, "seq": 64, "micro_batch": 0},
    "adamw": {"lr": 0.003, "beta1": 0.9, "beta2": 0.999, "eps": 1e-08, "weight_decay": 0.0},
    "model": {"label": "tiny", "init_seed": 1337},
    "rng": {"state": None, "note": "the loop draws no random numbers: batches are read in order and there is no dropout"},
    "last_train_loss": 4.0703125,
}


def trainer_state_seeds():
    d = reset("trainer_state")

    def state(name, change=None):
        s = json.loads(json.dumps(STATE))
        if change:
            change(s)
        write(d, name, json.dumps(s, indent=2) + "\n")

    state("valid.json")
    state("valid-micro-batch.json", lambda s: s["batch"].update(batch=8, micro_batch=2))
    state("valid-fresh.json", lambda s: (s.update(step=0, last_train_loss=0.0),
                                         s["data"].update(path="caf\u00e9 \U0001F600.txt", position=0, epoch=0),
                                         s["model"].update(init_seed=18446744073709551615)))
    write(d, "valid-compact.json", json.dumps(STATE, separators=(",", ":")))
    state("bad-format.json", lambda s: s.update(format="osprey-gpt2-train 2"))
    state("bad-missing-adamw.json", lambda s: s.pop("adamw"))
    state("bad-negative-step.json", lambda s: s.update(step=-1))
    state("bad-zero-batch.json", lambda s: s["batch"].update(batch=0))
    state("bad-string-seq.json", lambda s: s["batch"].update(seq="64"))
    state("bad-null-lr.json", lambda s: s["adamw"].update(lr=None))
    state("bad-data-array.json", lambda s: s.update(data=[1, 2]))
    write(d, "bad-array.json", "[" + json.dumps(STATE) + "]")
    write(d, "bad-truncated.json", json.dumps(STATE)[:150])
    write(d, "bad-empty.json", "")
    # Keys given twice (json.dumps cannot write them), at the top and nested.
    compact = json.dumps(STATE, separators=(",", ":"))
    write(d, "bad-duplicate-step.json", '{"step":5,' + compact[1:])
    write(d, "bad-duplicate-lr.json", compact.replace('"adamw":{', '"adamw":{"lr":1.0,'))


if __name__ == "__main__":
    llmc_seeds()
    shard_seeds()
    config_seeds()
    training_data_seeds()
    trainer_state_seeds()
