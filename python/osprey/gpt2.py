"""GPT-2 from Python: the CLI's model, on the CLI's handlers, with the CLI's bits.

    from osprey import gpt2

    model = gpt2.load("tiny", backend="gpu", device="host")   # a preset, a directory, a name
    print(model.generate("The capital of France is", 20))
    row = model.logits("The capital of France is")            # the last position's logits
    data = model.training_data("data/tinyshakespeare.txt")
    model.train(data, steps=10, batch=4, seq=64, lr=3e-3, progress=print)

`load(model)` reads a Hugging Face directory or an llm.c .bin file where `model` is a path; a size
("124M", "350M", "774M", "1558M", "tiny") is GPT-2's initialisation of that shape (with `seed`);
a Hugging Face name ("gpt2", "gpt2-xl") is that model in the Hugging Face cache, as
`osprey-gpt2 --model` reads it; None is the CLI's default ($OSPREY_GPT2, the cache, else the 124M
initialisation). `backend` is "lists", "gpu" or "fast"; `device` (gpu) "host", "cuda" or "opencl",
else $OSPREY_GPU. Choices the CLI refuses raise OspreyError with the CLI's message.

On the exact handlers (lists, gpu on host, cuda or opencl) every number is the CLI's, bit for bit:
the logits `osprey-gpt2 logits` prints, the text `generate` prints (greedy or sampled), the loss
and gradient sums of `train-step`, the losses and weights of `train`.
"""

from __future__ import annotations

import codecs
import warnings
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

from . import _osprey
from .result import OspreyError

Batch = _osprey.Batch
TrainingData = _osprey.TrainingData

try:  # NumPy is optional: without it, logits stay osprey Buffers (sequences of floats)
    import numpy as _np
except ImportError:  # pragma: no cover - the tests run with NumPy
    _np = None


class InitialisedWeightsWarning(UserWarning):
    """No checkpoint was read: the model is GPT-2's initialisation, and its text is not meaningful."""


@dataclass(frozen=True)
class StepResult:
    """One training step: the loss before the update, and each gradient tensor's sum (the CLI's
    `train-step` lines), after `step` updates in all."""

    loss: float
    step: int
    grad_sums: dict


@dataclass(frozen=True)
class Progress:
    """A training step as the CLI's progress line reports it."""

    step: int
    last_step: int
    loss: float
    val_loss: Optional[float]
    seconds: float
    tokens_per_second: float

    def __str__(self) -> str:
        val = f" | val loss {self.val_loss:.6f}" if self.val_loss is not None else ""
        return (f"step {self.step}/{self.last_step}: train loss {self.loss:.6f}{val} | "
                f"{self.tokens_per_second:.0f} tokens/s | {self.seconds:.3f} s/step")


Tokens = Union[str, bytes, Sequence[int]]


class Model:
    """A GPT-2 held on one handler (see the module's docstring); made by load()."""

    def __init__(self, inner: _osprey.Gpt2Model):
        self._inner = inner

    # --- what it is -------------------------------------------------------------------------
    @property
    def device(self) -> str:
        """Who answers: "lists", "host", "cuda: NVIDIA H200", "opencl: pocl cpu", "fast cuda: ..."."""
        return self._inner.device

    @property
    def label(self) -> str:
        """The size the CLI announces: "124M", "tiny", ..."""
        return self._inner.label

    @property
    def config(self) -> dict:
        return self._inner.config

    @property
    def notice(self) -> str:
        """What the CLI prints on stderr when no checkpoint was read ("" when one was)."""
        return self._inner.notice

    @property
    def steps(self) -> int:
        """How many AdamW updates the weights have had here."""
        return self._inner.steps

    @property
    def parameter_names(self) -> list:
        return self._inner.parameter_names

    def __repr__(self) -> str:
        return f"osprey.gpt2.Model(gpt2 ({self.label}) on {self.device})"

    # --- text -------------------------------------------------------------------------------
    def encode(self, text: Union[str, bytes]) -> list:
        """Token ids of a text (UTF-8) or of bytes."""
        return self._inner.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids (bytes that are not UTF-8 shown as U+FFFD)."""
        return self._inner.decode(list(ids)).decode("utf-8", errors="replace")

    def _ids(self, tokens: Tokens) -> list:
        if isinstance(tokens, (str, bytes)):
            return self._inner.encode(tokens)
        return [int(t) for t in tokens]

    # --- inference --------------------------------------------------------------------------
    def generate_ids(self, prompt: Tokens, tokens: int, *, temperature: float = 0.0, top_k: int = 0,
                     top_p: float = 1.0, seed: int = 1337,
                     on_token: Optional[Callable[[int], object]] = None) -> list:
        """The ids of `tokens` new tokens after `prompt`: greedy at temperature 0, else sampled
        (top_k, top_p; `seed` keys the draws as the CLI's --seed). on_token(id) sees each as it
        comes; raising there stops generation and the exception propagates."""
        ids = self._ids(prompt)
        if not ids:
            raise OspreyError("the prompt is empty: GPT-2 needs at least one token to continue")
        return self._inner.generate(ids, tokens, temperature, top_k, top_p, seed, on_token)

    def generate(self, prompt: Tokens, tokens: int, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 1337,
                 on_text: Optional[Callable[[str], object]] = None) -> str:
        """The prompt and its continuation, as `osprey-gpt2 generate` prints it after its first
        line. on_text(piece) streams the continuation as it is chosen (whole characters only)."""
        text_prompt = prompt if isinstance(prompt, str) else (
            prompt.decode("utf-8", errors="replace") if isinstance(prompt, bytes) else self.decode(prompt))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces = []

        def on_token(token: int) -> None:
            piece = decoder.decode(self._inner.token_bytes(token))
            pieces.append(piece)
            if on_text is not None and piece:
                on_text(piece)

        self.generate_ids(prompt, tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                          on_token=on_token)
        tail = decoder.decode(b"", final=True)
        if tail and on_text is not None:
            on_text(tail)
        return text_prompt + "".join(pieces) + tail

    def logits(self, tokens: Tokens, *, every_position: bool = False):
        """The logits of one sequence (text or ids): the last position's (vocab_size,), as
        `osprey-gpt2 logits` prints them, or every position's (T, vocab_size). A NumPy float64
        array over the values without a copy (an osprey Buffer where NumPy is missing)."""
        ids = self._ids(tokens)
        buffer = self._inner.logits(ids, every_position)
        if _np is None:
            return buffer
        values = _np.asarray(buffer)
        return values.reshape(len(ids), -1) if every_position else values

    # --- training ---------------------------------------------------------------------------
    def batch(self, inputs, targets=None) -> Batch:
        """A Batch from (B, T) inputs and targets, or from one (B, T + 1) array of tokens (inputs
        its first T columns, targets its last T), as nested sequences or NumPy arrays."""
        rows = [list(map(int, row)) for row in inputs]
        if targets is None:
            targets = [row[1:] for row in rows]
            rows = [row[:-1] for row in rows]
        else:
            targets = [list(map(int, row)) for row in targets]
        B, T = len(rows), len(rows[0]) if rows else 0
        if any(len(r) != T for r in rows) or len(targets) != B or any(len(r) != T for r in targets):
            raise OspreyError("a batch's rows must all have the same length, in inputs and targets alike")
        return Batch([t for r in rows for t in r], [t for r in targets for t in r], B, T)

    def _as_batch(self, batch) -> Batch:
        if isinstance(batch, Batch):
            return batch
        if isinstance(batch, tuple) and len(batch) == 2:
            return self.batch(*batch)
        return self.batch(batch)

    def loss(self, batch) -> float:
        """The mean token loss of a batch with the current weights."""
        return self._inner.loss(self._as_batch(batch))

    def train_step(self, batch, *, micro_batch: int = 0, lr: float = 1e-3, beta1: float = 0.9,
                   beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                   grad_sums: bool = True) -> StepResult:
        """One AdamW step on a batch (a Batch, (inputs, targets), or a (B, T + 1) array): the
        weights and the optimiser's moments are updated here. The first step of a fresh model is
        `osprey-gpt2 train-step`'s, bit for bit on the exact handlers."""
        r = self._inner.train_step(self._as_batch(batch), micro_batch=micro_batch, lr=lr, beta1=beta1,
                                   beta2=beta2, eps=eps, weight_decay=weight_decay, grad_sums=grad_sums)
        return StepResult(loss=r["loss"], step=r["step"], grad_sums=r["grad_sums"])

    def training_data(self, path: str, *, val_path: Optional[str] = None,
                      cache_dir: Optional[str] = None) -> TrainingData:
        """A text or llm.c token shards, tokenised once (through the CLI's token cache) and split
        as `osprey-gpt2 train --data` splits them."""
        return self._inner.training_data(path, val_path=val_path, cache_dir=cache_dir)

    def train(self, data: TrainingData, steps: int, *, batch: int = 4, seq: int = 64, micro_batch: int = 0,
              lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
              weight_decay: float = 0.0, val_every: int = 0, val_batches: int = 8,
              progress: Optional[Callable[[Progress], object]] = None) -> list:
        """`steps` training steps, as `osprey-gpt2 train` runs them: the data's next batches,
        validation every `val_every` steps and after the last. progress(Progress) is called after
        each step; returning False stops there, raising stops and propagates. Returns every step's
        Progress."""

        def report(record: dict) -> object:
            return progress(Progress(**record)) if progress is not None else None

        outcome = self._inner.train(data, steps, batch=batch, seq=seq, micro_batch=micro_batch, lr=lr,
                                    beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                                    val_every=val_every, val_batches=val_batches,
                                    progress=report if progress is not None else None)
        for note in outcome["notes"]:
            warnings.warn(note, stacklevel=2)
        return [Progress(**record) for record in outcome["steps"]]

    def save(self, directory: str, *, dtype: str = "f32", overwrite: bool = False) -> None:
        """The weights as a Hugging Face model directory (what `osprey-gpt2 --model DIR` and
        transformers read), stored as f32, f64 or bf16."""
        self._inner.save(directory, dtype=dtype, overwrite=overwrite)


def load(model: Optional[str] = None, *, backend: str = "lists", device: Optional[str] = None,
         seed: int = 1337, preset: Optional[str] = None, products: Optional[str] = None) -> Model:
    """A GPT-2 on a handler (see the module's docstring). Warns (InitialisedWeightsWarning) where
    the CLI would say on stderr that no checkpoint was read."""
    inner = _osprey.Gpt2Model.load(None if model is None else str(model), preset=preset, seed=seed,
                                   backend=backend, device=device, products=products)
    loaded = Model(inner)
    if loaded.notice:
        warnings.warn(loaded.notice, InitialisedWeightsWarning, stacklevel=2)
    return loaded


__all__ = ["Batch", "InitialisedWeightsWarning", "Model", "Progress", "StepResult", "TrainingData", "load"]
