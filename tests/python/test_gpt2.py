"""GPT-2 from Python against the CLI, on the exact host handlers (lists and gpu/host), byte for byte:
the logits `osprey-gpt2 logits` prints, the text `generate` prints (greedy and sampled), the loss
and gradient sums of `train-step`, the losses of `train` (its loss.csv) and the weights it saves.
The model is the `tiny` preset (GPT-2's initialisation: 2 blocks, width 64, the whole vocabulary)."""

import warnings

import numpy as np
import pytest

from osprey import OspreyError, gpt2

from conftest import SHAKESPEARE, run_cli

PROMPT = "The capital of France is"
HANDLERS = [("lists", None, "lists"), ("gpu", "host", "host")]


def cli_lines(*args):
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode("utf-8", errors="replace").splitlines()


def backend_args(backend, device):
    return ["--backend", backend] + (["--device", device] if device else [])


@pytest.fixture(scope="module")
def models():
    """The tiny preset on each exact host handler, loaded once (they are updated only by tests
    that load their own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpt2.InitialisedWeightsWarning)
        return {backend: gpt2.load("tiny", backend=backend, device=device) for backend, device, _ in HANDLERS}


def fresh(backend, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpt2.InitialisedWeightsWarning)
        return gpt2.load("tiny", backend=backend, device=device)


# --- the same bits as the CLI --------------------------------------------------------------------

@pytest.mark.parametrize("backend,device,name", HANDLERS)
def test_logits_are_the_clis_bytes(models, backend, device, name):
    lines = cli_lines("logits", *backend_args(backend, device), "--preset", "tiny", "--prompt", PROMPT)
    assert lines[0] == f"gpt2 (tiny) on {name}"
    model = models[backend]
    assert model.device == name and model.label == "tiny"
    logits = model.logits(PROMPT)
    assert logits.dtype == np.float64 and logits.shape == (50257,)
    # Both as text (the CLI prints 17 significant digits, which round-trip a double) and as bits.
    assert "".join(f"{x:.17g}\n" for x in logits) == "".join(line + "\n" for line in lines[1:])
    assert np.array([float(line) for line in lines[1:]]).tobytes() == logits.tobytes()


def test_every_handler_gives_the_same_logits(models):
    rows = [models[backend].logits(PROMPT).tobytes() for backend, _, _ in HANDLERS]
    assert rows[0] == rows[1]
    every = models["lists"].logits(PROMPT, every_position=True)
    ids = models["lists"].encode(PROMPT)
    assert every.shape == (len(ids), 50257)
    assert every[-1].tobytes() == rows[0], "the last row of every position's logits is prefill's"


@pytest.mark.parametrize("backend,device,name", HANDLERS)
@pytest.mark.parametrize("sampling", [[], ["--temperature", "1", "--top-k", "40"],
                                      ["--temperature", "0.8", "--top-p", "0.9"]])
def test_generate_is_the_clis_text(models, backend, device, name, sampling):
    lines = cli_lines("generate", *backend_args(backend, device), "--preset", "tiny", "--prompt", PROMPT,
                      "--tokens", "12", *sampling)
    options = dict(zip(sampling[::2], sampling[1::2]))
    streamed = []
    text = models[backend].generate(PROMPT, 12, temperature=float(options.get("--temperature", 0)),
                                    top_k=int(options.get("--top-k", 0)), top_p=float(options.get("--top-p", 1)),
                                    seed=int(options.get("--seed", 1337)), on_text=streamed.append)
    assert lines == [f"gpt2 (tiny) on {name}", text]
    assert PROMPT + "".join(streamed) == text


def test_the_seed_keys_the_initialisation_and_the_draws_as_the_clis():
    # --seed N is both: a preset initialised with N, and the draws keyed by N.
    lines = cli_lines("generate", "--preset", "tiny", "--seed", "7", "--prompt", PROMPT, "--tokens", "12",
                      "--temperature", "1", "--top-k", "40")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpt2.InitialisedWeightsWarning)
        model = gpt2.load("tiny", seed=7)
    assert lines[1] == model.generate(PROMPT, 12, temperature=1.0, top_k=40, seed=7)


def shakespeare_batch(model, tmp_path, B, T):
    data = model.training_data(str(SHAKESPEARE), cache_dir=str(tmp_path / "cache"))
    return data, next(data.batches(B, T))


@pytest.mark.parametrize("backend,device,name", HANDLERS)
def test_a_training_step_is_the_clis_train_step(tmp_path, backend, device, name):
    lines = cli_lines("train-step", *backend_args(backend, device), "--preset", "tiny", "--data", SHAKESPEARE,
                      "--batch", "2", "--seq", "16", "--lr", "3e-3", "--cache-dir", tmp_path / "cache")
    model = fresh(backend, device)
    _, batch = shakespeare_batch(model, tmp_path, 2, 16)
    step = model.train_step(batch, lr=3e-3)
    assert step.step == 1 and model.steps == 1
    ours = [f"loss {step.loss:.17g}"] + [f"grad {n} {s:.17g}" for n, s in step.grad_sums.items()]
    ours.append(f"loss after step {model.loss(batch):.17g}")
    assert lines[0] == f"gpt2 (tiny) on {name}"
    assert lines[2:] == ours
    assert list(step.grad_sums) == model.parameter_names


def test_batches_from_arrays_are_the_same_batch(tmp_path):
    model = fresh("gpu", "host")
    data, batch = shakespeare_batch(model, tmp_path, 2, 8)
    rows = np.array(batch.inputs).reshape(2, 8)
    targets = np.array(batch.targets).reshape(2, 8)
    tokens = np.concatenate([rows, targets[:, -1:]], axis=1)  # (B, T + 1)
    losses = {model.loss(batch), model.loss((rows, targets)), model.loss(tokens), model.loss(tokens.tolist())}
    assert len(losses) == 1


@pytest.mark.parametrize("backend,device,name", HANDLERS)
def test_training_is_the_clis_training(tmp_path, backend, device, name):
    run_dir = tmp_path / "run"
    lines = cli_lines("train", *backend_args(backend, device), "--preset", "tiny", "--data", SHAKESPEARE,
                      "--steps", "3", "--batch", "2", "--seq", "16", "--lr", "3e-3", "--val-every", "2",
                      "--val-batches", "2", "--save", run_dir, "--no-plot", "--cache-dir", tmp_path / "cache")
    assert lines[0] == f"gpt2 (tiny) on {name}"
    model = fresh(backend, device)
    data = model.training_data(str(SHAKESPEARE), cache_dir=str(tmp_path / "cache"))
    seen = []
    steps = model.train(data, 3, batch=2, seq=16, lr=3e-3, val_every=2, val_batches=2, progress=seen.append)
    assert seen == steps and [s.step for s in steps] == [1, 2, 3] and model.steps == 3
    # loss.csv: step, training loss and validation loss with 17 significant digits, tokens/s.
    rows = [line.split(",") for line in (run_dir / "loss.csv").read_text().splitlines()[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (str(s.step), f"{s.loss:.17g}", "" if s.val_loss is None else f"{s.val_loss:.17g}") for s in steps]
    assert steps[1].val_loss is not None and steps[2].val_loss is not None and steps[0].val_loss is None
    # The weights after the run, saved as the CLI's checkpoint saves them (float64).
    model.save(str(tmp_path / "ours"), dtype="f64")
    theirs = (run_dir / "checkpoint" / "model.safetensors").read_bytes()
    assert (tmp_path / "ours" / "model.safetensors").read_bytes() == theirs
    assert data.position == 3 * 2 * 16, "the data's position is where the CLI's stream stands"


def test_a_saved_model_loads_as_a_directory(tmp_path, models):
    fresh_model = fresh("lists", None)
    fresh_model.save(str(tmp_path / "tiny"), dtype="f64")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checkpoint was read: no warning
        again = gpt2.load(str(tmp_path / "tiny"))
    assert again.notice == ""
    assert again.logits(PROMPT).tobytes() == models["lists"].logits(PROMPT).tobytes()
    with pytest.raises(OspreyError, match="save"):
        fresh_model.save(str(tmp_path / "tiny"))  # a model is there: not replaced unless asked
    fresh_model.save(str(tmp_path / "tiny"), overwrite=True)


# --- training from a program ---------------------------------------------------------------------

def test_progress_can_stop_the_loop(tmp_path):
    model = fresh("gpu", "host")
    data = model.training_data(str(SHAKESPEARE), cache_dir=str(tmp_path / "cache"))
    steps = model.train(data, 5, batch=1, seq=8, progress=lambda p: p.step < 2)
    assert [s.step for s in steps] == [1, 2] and model.steps == 2


def test_an_exception_in_a_callback_propagates_and_the_model_goes_on(tmp_path):
    model = fresh("gpu", "host")
    data = model.training_data(str(SHAKESPEARE), cache_dir=str(tmp_path / "cache"))

    def fail(progress):
        raise ValueError(f"stop at {progress.step}")

    with pytest.raises(ValueError, match="stop at 1"):
        model.train(data, 5, batch=1, seq=8, progress=fail)
    assert model.steps == 1, "the step the callback saw was taken"

    def fail_on_token(token):
        raise KeyError("enough")

    with pytest.raises(KeyError, match="enough"):
        model.generate_ids(PROMPT, 5, on_token=fail_on_token)
    assert len(model.generate_ids(PROMPT, 3)) == 3


def test_loading_warns_where_the_cli_says_no_checkpoint_was_read():
    done = run_cli("logits", "--preset", "tiny", "--prompt", "hi")
    notice = done.stderr.decode().strip()
    with pytest.warns(gpt2.InitialisedWeightsWarning) as caught:
        gpt2.load("tiny")
    assert str(caught[0].message) == notice


# --- errors: the CLI's messages, raised ----------------------------------------------------------

def raised(call):
    with pytest.raises(OspreyError) as error:
        call()
    return str(error.value)


def cli_message(*args, env_changes=None):
    from conftest import cli_error

    return cli_error(*args, env_changes=env_changes)


@pytest.mark.parametrize("backend,device,args", [
    ("tpu", None, ["--backend", "tpu"]),
    ("gpu", "tpu", ["--backend", "gpu", "--device", "tpu"]),
    ("gpu", "cuda", ["--backend", "gpu", "--device", "cuda"]),
    ("fast", None, ["--backend", "fast"]),
    ("lists", "host", ["--backend", "lists", "--device", "host"]),
])
def test_handlers_that_cannot_be_had_are_the_clis_errors(backend, device, args):
    from conftest import cuda_usable

    if device == "cuda" and cuda_usable() or backend == "fast" and cuda_usable():
        pytest.skip("a CUDA device is here")
    expected = cli_message("logits", *args, "--preset", "tiny", "--prompt", "hi")
    assert raised(lambda: gpt2.load("tiny", backend=backend, device=device)) == expected


def test_a_bad_osprey_gpu_is_the_clis_error(monkeypatch):
    monkeypatch.setenv("OSPREY_GPU", "tpu")
    expected = cli_message("logits", "--backend", "gpu", "--preset", "tiny", "--prompt", "hi",
                           env_changes={"OSPREY_GPU": "tpu"})
    assert raised(lambda: gpt2.load("tiny", backend="gpu")) == expected


def test_products_are_the_fast_backends_alone():
    assert raised(lambda: gpt2.load("tiny", products="tf32")) == \
        "products `tf32` applies to the fast backend; the lists backend's products are exact"


def test_models_that_cannot_be_read_are_the_clis_errors(tmp_path, monkeypatch):
    missing = str(tmp_path / "no-such-model")
    assert raised(lambda: gpt2.load(missing)) == cli_message("logits", "--model", missing, "--prompt", "hi")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    expected = cli_message("logits", "--model", "gpt2-xl", "--prompt", "hi",
                           env_changes={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert raised(lambda: gpt2.load("gpt2-xl")) == expected


def test_generation_that_cannot_run_is_the_clis_error(models):
    model = models["lists"]
    too_many = cli_message("generate", "--preset", "tiny", "--prompt", PROMPT, "--tokens", "200")
    assert raised(lambda: model.generate(PROMPT, 200)) == too_many
    bad_temperature = cli_message("generate", "--preset", "tiny", "--prompt", PROMPT, "--temperature", "-1")
    assert raised(lambda: model.generate(PROMPT, 5, temperature=-1.0)) == bad_temperature
    bad_top_p = cli_message("generate", "--preset", "tiny", "--prompt", PROMPT, "--temperature", "1", "--top-p", "0")
    assert raised(lambda: model.generate(PROMPT, 5, temperature=1.0, top_p=0.0)) == bad_top_p
    assert raised(lambda: model.generate("", 5)) == "the prompt is empty: GPT-2 needs at least one token to continue"
    assert raised(lambda: model.generate_ids([50257], 1)) == "token id 50257 is outside the model's vocabulary of 50257"
    assert raised(lambda: model.logits([-1])) == "token id -1 is outside the model's vocabulary of 50257"
    assert raised(lambda: model.logits([])) == "the prompt is empty: GPT-2 needs at least one token to continue"
    assert len(model.generate_ids(PROMPT, 2)) == 2, "the model is as usable as before"


def test_training_that_cannot_run_is_an_error(tmp_path, models):
    model = fresh("lists", None)
    data, batch = shakespeare_batch(model, tmp_path, 2, 8)
    missing = str(tmp_path / "missing.txt")
    expected = cli_message("train-step", "--preset", "tiny", "--data", missing, "--cache-dir", tmp_path / "cache")
    assert raised(lambda: model.training_data(missing, cache_dir=str(tmp_path / "cache"))) == expected
    assert "lr" in raised(lambda: model.train_step(batch, lr=0.0))
    assert raised(lambda: model.train_step(batch, micro_batch=3)) == "--micro-batch 3 must divide --batch 2"
    assert raised(lambda: model.train(data, 1, batch=2, seq=8, micro_batch=3)) == "micro_batch 3 must divide batch 2"
    assert raised(lambda: model.train(data, -1)) == "steps is -1: must be 0 or more"
    assert raised(lambda: model.loss(([[1, 2]], [[1]]))) == \
        "a batch's rows must all have the same length, in inputs and targets alike"
    assert raised(lambda: model.loss(([[1, 60000]], [[1, 2]]))) == \
        "token id 60000 is outside the model's vocabulary of 50257"
    assert raised(lambda: model.loss([[1] * 200])) == "--seq 199 exceeds the model's context of 128 positions"
    assert raised(lambda: model.train(data, 1, batch=2, seq=400000)).startswith(f"{SHAKESPEARE}: the training split")
    assert raised(lambda: model.save(str(tmp_path / "out"), dtype="f16")) == "dtype `f16`: choose f32, f64 or bf16"
    assert model.steps == 0, "no step was taken by a failed call"
    assert model.train_step(batch).step == 1
