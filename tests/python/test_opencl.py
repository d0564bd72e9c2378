"""The opencl device from Python, through whatever OpenCL device answers (PoCL on the CPU here;
OSPREY_OPENCL_PLATFORM / OSPREY_OPENCL_DEVICE choose another): the surface's values, a memory no
other library can read refused in words, and GPT-2 tiny on gpu/opencl with lists' and gpu/host's
doubles, compared as bytes: its logits, its greedy and sampled generation, a training step.

Where the build has OpenCL (CTest says so in OSPREY_EXPECT_OPENCL) the module must have the device;
where it has not, device "opencl" is the CLI's refusal. An unknown device is the CLI's error either
way."""

import os
import warnings

import numpy as np
import pytest

import osprey
from osprey import OspreyError, fromGpu, gpt2, gpuDevice, gpuGet, gpuLoadTensor, gpuMatMul, toGpu

from conftest import PYTHON, SHAKESPEARE, SOURCE_DIR, cli_error, run, run_cli

PROMPT = "The capital of France is"
PRODUCT = SOURCE_DIR / "examples" / "python" / "product.py"

needs_opencl = pytest.mark.skipif(not osprey.built_with_opencl,
                                  reason="the module was built without OpenCL (test_opencl_without_the_build_...)")


def tiny(backend, device=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpt2.InitialisedWeightsWarning)
        return gpt2.load("tiny", backend=backend, device=device)


def raised(call):
    with pytest.raises(OspreyError) as error:
        call()
    return str(error.value)


def as_bytes(numbers):
    return np.array(numbers, dtype=np.float64).tobytes()


# --- the module has the device where the build does ---------------------------------------------

def test_the_module_has_opencl_where_the_build_does():
    expected = os.environ.get("OSPREY_EXPECT_OPENCL")
    if expected is None:
        pytest.skip("OSPREY_EXPECT_OPENCL is not set (CTest sets it)")
    assert osprey.built_with_opencl == (expected == "ON")


def test_an_unknown_device_is_the_clis_error(monkeypatch):
    for name in ["tpu", "OpenCL"]:
        expected = cli_error("logits", "--backend", "gpu", "--device", name, "--preset", "tiny", "--prompt", "hi")
        assert expected == f"unknown gpu device `{name}`: choose host, cuda or opencl"
        assert raised(lambda: gpt2.load("tiny", backend="gpu", device=name)) == expected
        assert toGpu([1.0], device=name).message == expected
        assert raised(lambda: gpuDevice(name)) == expected
    monkeypatch.setenv("OSPREY_GPU", "OpenCL")
    expected = cli_error("logits", "--backend", "gpu", "--preset", "tiny", "--prompt", "hi",
                         env_changes={"OSPREY_GPU": "OpenCL"})
    assert expected == "unknown gpu device `OpenCL` (OSPREY_GPU): choose host, cuda or opencl"
    assert raised(lambda: gpt2.load("tiny", backend="gpu")) == expected
    assert toGpu([1.0]).message == expected


def test_opencl_without_the_build_is_the_clis_refusal(monkeypatch):
    if osprey.built_with_opencl:
        pytest.skip("the module has the opencl device (the other tests here run on it)")
    expected = cli_error("logits", "--backend", "gpu", "--device", "opencl", "--preset", "tiny", "--prompt", "hi")
    assert expected.startswith("gpu device `opencl`: this program was built without the OpenCL loader and headers")
    assert raised(lambda: gpt2.load("tiny", backend="gpu", device="opencl")) == expected
    assert toGpu([1.0], device="opencl").message == expected
    assert raised(lambda: gpuDevice("opencl")) == expected
    monkeypatch.setenv("OSPREY_GPU", "opencl")
    assert toGpu([1.0]).message == expected


@needs_opencl
def test_opencl_that_cannot_be_had_is_the_clis_error_never_the_host(tmp_path):
    no_platforms = {"OCL_ICD_VENDORS": str(tmp_path), "OSPREY_GPU": "opencl"}  # a loader with no ICD
    expected = cli_error("logits", "--backend", "gpu", "--preset", "tiny", "--prompt", "hi", env_changes=no_platforms)
    assert expected.startswith("opencl: no OpenCL platform")
    done = run([PYTHON, "-m", "osprey", PRODUCT, "--run"], no_platforms)
    assert done.stdout == b"", "no quiet run on the host"
    assert done.stderr.decode() == f"error: {expected}\n"
    assert done.returncode == 1


# --- the surface ----------------------------------------------------------------------------------

@needs_opencl
def test_the_seeds_program_on_opencl():
    name = gpuDevice("opencl")
    assert name.startswith("opencl: ")
    done = run([PYTHON, "-m", "osprey", PRODUCT, "--run"], {"OSPREY_GPU": "opencl"})
    assert done.stdout.decode() == f"{name}: first element = 7.0\n", done.stderr
    assert done.returncode == 0


@needs_opencl
def test_the_surface_on_opencl(monkeypatch):
    x = toGpu([1.0, 2.0, 3.0, 4.0], device="opencl").unwrap()
    assert x.device == gpuDevice("opencl") and len(x) == 4
    assert repr(x) == f"osprey.Buffer(4 elements on {x.device})"
    y = gpuMatMul(x, x, 2, 2, 2).unwrap()
    assert fromGpu(y).unwrap() == [7.0, 10.0, 15.0, 22.0] and gpuGet(y, 0).unwrap() == 7.0
    assert gpuGet(y, 4).message == "get: index out of range: 4 not below length 4"
    host = toGpu([1.0], device="host").unwrap()
    assert "different devices" in gpuMatMul(x, host, 1, 1, 1).message
    monkeypatch.setenv("OSPREY_GPU", "opencl")
    assert gpuDevice() == x.device and toGpu([1.0]).unwrap().device == x.device


@needs_opencl
def test_opencl_products_are_the_hosts_bits():
    rng = np.random.default_rng(2024)
    a, b = rng.standard_normal(37 * 53), rng.standard_normal(53 * 29)
    products = []
    for device in ["host", "opencl"]:
        da, db = toGpu(a, device=device).unwrap(), toGpu(b, device=device).unwrap()
        products.append(as_bytes(fromGpu(gpuMatMul(da, db, 37, 53, 29).unwrap()).unwrap()))
    assert products[0] == products[1]


@needs_opencl
def test_gpu_load_tensor_on_opencl_is_the_hosts(tmp_path):
    done = run_cli("init", "--preset", "tiny", "--dtype", "f64", "--out", tmp_path / "tiny")
    assert done.returncode == 0, done.stderr
    path = str(tmp_path / "tiny" / "model.safetensors")
    on_host = np.asarray(gpuLoadTensor(path, "wpe.weight", device="host").unwrap()).tobytes()
    on_opencl = gpuLoadTensor(path, "wpe.weight", device="opencl").unwrap()
    assert on_opencl.device == gpuDevice("opencl")
    assert as_bytes(fromGpu(on_opencl).unwrap()) == on_host


@needs_opencl
def test_an_opencl_buffer_is_copied_back_never_shared():
    x = toGpu([1.0, 2.0], device="opencl").unwrap()
    with pytest.raises(BufferError, match="not on the host: copy them back with fromGpu"):
        memoryview(x)
    with pytest.raises(BufferError, match="fromGpu"):
        np.asarray(x)
    assert x.__dlpack_device__() == (4, 0)
    with pytest.raises(BufferError, match="DLPack cannot share in place"):
        x.__dlpack__()
    # Its address is the device's own handle: good for a Buffer on opencl again, and nothing else.
    y = osprey.bufFromRawDevicePtr(osprey.rawDevicePtr(x), 2, device="opencl", owner=x).unwrap()
    del x
    assert fromGpu(y).unwrap() == [1.0, 2.0], "the owner keeps the elements"


# --- GPT-2: lists' and gpu/host's bits --------------------------------------------------------------

@pytest.fixture(scope="module")
def models():
    """The tiny preset on lists, gpu/host and gpu/opencl, loaded once (no test here trains them)."""
    if not osprey.built_with_opencl:
        pytest.skip("the module was built without OpenCL")
    return {"lists": tiny("lists"), "host": tiny("gpu", "host"), "opencl": tiny("gpu", "opencl")}


def test_the_model_on_opencl_is_announced_as_the_clis(models):
    done = run_cli("logits", "--backend", "gpu", "--device", "opencl", "--preset", "tiny", "--prompt", PROMPT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    model = models["opencl"]
    assert model.device == gpuDevice("opencl") and repr(model) == f"osprey.gpt2.Model(gpt2 (tiny) on {model.device})"
    assert lines[0] == f"gpt2 (tiny) on {model.device}"
    assert np.array([float(line) for line in lines[1:]]).tobytes() == model.logits(PROMPT).tobytes()


def test_logits_on_opencl_are_lists_bytes(models):
    rows = {name: m.logits(PROMPT) for name, m in models.items()}
    assert rows["opencl"].dtype == np.float64 and rows["opencl"].shape == (50257,)
    assert rows["opencl"].tobytes() == rows["lists"].tobytes() == rows["host"].tobytes()
    every = {name: models[name].logits(PROMPT, every_position=True) for name in ["lists", "opencl"]}
    assert every["opencl"].shape == (len(models["lists"].encode(PROMPT)), 50257)
    assert every["opencl"].tobytes() == every["lists"].tobytes()


@pytest.mark.parametrize("sampling", [{}, {"temperature": 1.0, "top_k": 40}, {"temperature": 0.8, "top_p": 0.9}])
def test_generation_on_opencl_is_lists(models, sampling):
    ids = {name: m.generate_ids(PROMPT, 12, **sampling) for name, m in models.items()}
    assert len(ids["opencl"]) == 12
    assert ids["opencl"] == ids["lists"] == ids["host"]
    assert models["opencl"].generate(PROMPT, 12, **sampling) == models["lists"].generate(PROMPT, 12, **sampling)


@needs_opencl
def test_a_training_step_on_opencl_is_lists(tmp_path):
    steps = {}
    for name, (backend, device) in {"lists": ("lists", None), "opencl": ("gpu", "opencl")}.items():
        model = tiny(backend, device)
        data = model.training_data(str(SHAKESPEARE), cache_dir=str(tmp_path / "cache"))
        batch = next(data.batches(2, 16))
        step = model.train_step(batch, lr=3e-3, weight_decay=0.1)
        steps[name] = (step, model.loss(batch), model.logits(PROMPT))
    (ours, ours_after, ours_logits), (theirs, theirs_after, theirs_logits) = steps["opencl"], steps["lists"]
    assert ours.step == theirs.step == 1
    assert list(ours.grad_sums) == list(theirs.grad_sums)
    assert as_bytes([ours.loss, *ours.grad_sums.values()]) == as_bytes([theirs.loss, *theirs.grad_sums.values()])
    assert as_bytes([ours_after]) == as_bytes([theirs_after]), "the loss after AdamW"
    assert ours_logits.tobytes() == theirs_logits.tobytes(), "the updated weights' logits"
