"""The GPU side, for the GPU machine (scripts/gpu-check.sh runs `make test`, which runs this): the
seed's program on OSPREY_GPU=cuda, DLPack with PyTorch on a cuda buffer and back without a copy
(the same data pointer) and with the same values, refusals that leave no CUDA error behind, and
GPT-2's logits on gpu/cuda the CLI's bytes. Each test is skipped where this module was built
without nvcc, no CUDA device opens, or (for the PyTorch ones) torch is not installed."""

import numpy as np
import pytest

import osprey
from osprey import OspreyError, fromGpu, gpt2, gpuDevice, toGpu

from conftest import PYTHON, SOURCE_DIR, cuda_usable, run, run_cli

pytestmark = pytest.mark.skipif(not cuda_usable(), reason="no CUDA device (or the module was built without nvcc)")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_the_seeds_program_on_cuda():
    name = gpuDevice("cuda")
    assert name.startswith("cuda: ")
    done = run([PYTHON, "-m", "osprey", SOURCE_DIR / "examples" / "python" / "product.py", "--run"],
               {"OSPREY_GPU": "cuda"})
    assert done.stdout.decode() == f"{name}: first element = 7.0\n", done.stderr
    assert done.returncode == 0


def test_the_surface_on_cuda():
    x = toGpu([1.0, 2.0, 3.0, 4.0], device="cuda").unwrap()
    assert x.device == gpuDevice("cuda")
    assert x.__dlpack_device__()[0] == 2
    y = osprey.gpuMatMul(x, x, 2, 2, 2).unwrap()
    assert fromGpu(y).unwrap() == [7.0, 10.0, 15.0, 22.0]
    host = toGpu([1.0], device="host").unwrap()
    assert "different devices" in osprey.gpuMatMul(x, host, 1, 1, 1).message


def test_a_cuda_buffer_is_no_host_buffer():
    x = toGpu([1.0, 2.0], device="cuda").unwrap()
    with pytest.raises(BufferError, match="DLPack"):
        memoryview(x)
    with pytest.raises(BufferError):
        np.asarray(x)


def test_torch_reads_a_cuda_buffer_in_place(torch):
    x = toGpu([1.0, 2.0, 3.0, 4.0], device="cuda").unwrap()
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.dtype == torch.float64
    assert t.data_ptr() == x.address
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
    t[0] = 5.0
    torch.cuda.synchronize()
    assert osprey.gpuGet(x, 0).unwrap() == 5.0, "a write through torch is seen by Osprey"
    del x
    assert t.tolist() == [5.0, 2.0, 3.0, 4.0], "the tensor holds the buffer"


def test_osprey_reads_a_torch_tensor_in_place(torch):
    t = torch.arange(4, dtype=torch.float64, device="cuda") + 1
    x = osprey.from_dlpack(t)
    assert x.address == t.data_ptr()
    assert fromGpu(osprey.gpuMatMul(x, x, 2, 2, 2).unwrap()).unwrap() == [7.0, 10.0, 15.0, 22.0]
    back = torch.from_dlpack(x)
    assert back.data_ptr() == t.data_ptr(), "torch -> osprey -> torch is one memory"
    del t, back
    torch.cuda.empty_cache()
    assert fromGpu(x).unwrap() == [1.0, 2.0, 3.0, 4.0], "the buffer holds the tensor"


def test_tensors_osprey_cannot_share_are_refused(torch):
    with pytest.raises(OspreyError, match="float64"):
        osprey.from_dlpack(torch.zeros(4, dtype=torch.float32, device="cuda"))
    with pytest.raises(OspreyError, match="C-contiguous"):
        osprey.from_dlpack(torch.zeros(4, 4, dtype=torch.float64, device="cuda").t())
    assert toGpu([1.0], device="cuda").ok, "the device is as usable as before"


def test_a_host_address_is_no_cuda_buffer_and_leaves_no_error():
    host = np.zeros(4)
    refused = osprey.bufFromRawDevicePtr(host.ctypes.data, 4, device="cuda")
    assert not refused.ok and "not memory of a GPU" in refused.message
    x = toGpu([1.0, 2.0], device="cuda").unwrap()
    assert fromGpu(x).unwrap() == [1.0, 2.0], "no CUDA error was left behind"


def test_raw_device_pointers_on_cuda():
    x = toGpu([1.0, 2.0, 3.0, 4.0], device="cuda").unwrap()
    y = osprey.bufFromRawDevicePtr(osprey.rawDevicePtr(x), 4, device="cuda", owner=x).unwrap()
    assert y.address == x.address
    del x
    assert fromGpu(y).unwrap() == [1.0, 2.0, 3.0, 4.0]


def test_gpt2_logits_on_cuda_are_the_clis_bytes():
    done = run_cli("logits", "--backend", "gpu", "--device", "cuda", "--preset", "tiny", "--prompt", "Hello")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    with pytest.warns(gpt2.InitialisedWeightsWarning):
        model = gpt2.load("tiny", backend="gpu", device="cuda")
    assert lines[0] == f"gpt2 (tiny) on {model.device}"
    logits = model.logits("Hello")
    assert "".join(f"{x:.17g}\n" for x in logits) == "".join(line + "\n" for line in lines[1:])
    host = gpt2.load("tiny", backend="gpu", device="host")
    assert host.logits("Hello").tobytes() == logits.tobytes(), "cuda and host: the same doubles"
