"""The GPU surface from Python on the host device: the values C++ gives, Success and Error as
`match` takes them apart, and every error path as an Error value (or OspreyError where the call
returns no Result), with the CLI's words wherever the CLI says the same thing."""

import array
import json
import struct

import numpy as np
import pytest

import osprey
from osprey import Error, OspreyError, Success, fromGpu, gpuDevice, gpuGet, gpuLength, gpuLoadTensor, gpuMatMul, toGpu

from conftest import cli_error, cuda_usable, run_cli


def value(result):
    match result:
        case Success(value=v):
            return v
        case Error(message=m):
            pytest.fail(f"expected Success, got Error: {m}")


def message(result):
    match result:
        case Error(message=m):
            return m
        case Success(value=v):
            pytest.fail(f"expected Error, got Success({v!r})")


# --- what works ----------------------------------------------------------------------------------

def test_the_seeds_product():
    x = value(toGpu([1.0, 2.0, 3.0, 4.0]))
    y = value(gpuMatMul(x, x, 2, 2, 2))
    assert value(fromGpu(y)) == [7.0, 10.0, 15.0, 22.0]
    assert value(gpuGet(y, 0)) == 7.0
    assert gpuLength(y) == 4 and len(y) == 4
    assert gpuDevice() == "host" and gpuDevice("host") == "host" and gpuDevice(y) == "host"
    assert y.device == "host"
    assert repr(y) == "osprey.Buffer(4 elements on host)"


def test_results_match_by_keyword_and_by_position():
    match toGpu([2.0]):
        case Success(buffer):
            assert value(gpuGet(buffer, 0)) == 2.0
        case _:
            pytest.fail("positional pattern")
    match gpuGet(value(toGpu([2.0])), 5):
        case Error(text):
            assert "out of range" in text
        case _:
            pytest.fail("positional pattern")
    assert Success.__match_args__ == ("value",) and Error.__match_args__ == ("message",)
    assert toGpu([1.0]).ok and not gpuGet(value(toGpu([1.0])), 3).ok
    assert value(toGpu([3.0])).tolist() == [3.0]
    assert toGpu([3.0]).unwrap().tolist() == [3.0]
    with pytest.raises(OspreyError, match="out of range"):
        gpuGet(value(toGpu([1.0])), 3).unwrap()


def test_every_sequence_of_numbers_lifts():
    for values in ([1, 2.5, -3], (1, 2.5, -3), array.array("d", [1, 2.5, -3]), np.array([1, 2.5, -3]),
                   np.array([1, 2, -3], dtype=np.int64), np.array([1, 2.5, -3], dtype=np.float32),
                   range(3), [np.float64(1.5)]):
        lifted = value(toGpu(values))
        assert value(fromGpu(lifted)) == [float(v) for v in values]


def test_togpu_copies():
    host = np.array([1.0, 2.0, 3.0])
    lifted = value(toGpu(host))
    assert lifted.address != host.ctypes.data
    host[0] = 9.0
    assert value(gpuGet(lifted, 0)) == 1.0


def test_products_are_the_fma_chains_in_k_order():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    product = value(fromGpu(value(gpuMatMul(value(toGpu(a.ravel())), value(toGpu(b.ravel())), 5, 7, 3))))
    # Each output from 0.0, one rounding per multiply-add (math.fma is Python 3.13; exact with
    # fractions instead).
    from fractions import Fraction

    def fma(x, y, z):
        return float(Fraction(x) * Fraction(y) + Fraction(z))

    for i in range(5):
        for j in range(3):
            acc = 0.0
            for k in range(7):
                acc = fma(a[i, k], b[k, j], acc)
            assert product[i * 3 + j] == acc


def test_empty_buffers():
    empty = value(toGpu([]))
    assert gpuLength(empty) == 0
    assert value(fromGpu(empty)) == []


def test_gpu_load_tensor_reads_a_checkpoint(tmp_path):
    done = run_cli("init", "--preset", "tiny", "--dtype", "f64", "--out", tmp_path / "tiny")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "tiny" / "model.safetensors"
    raw = path.read_bytes()
    header_length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + header_length])
    name = next(n for n in header if n.startswith("wpe"))
    start, end = header[name]["data_offsets"]
    expected = np.frombuffer(raw[8 + header_length + start:8 + header_length + end], dtype="<f8")
    loaded = value(gpuLoadTensor(str(path), name))
    assert np.asarray(loaded).tobytes() == expected.tobytes()


# --- errors are values ---------------------------------------------------------------------------

def test_index_out_of_range():
    assert message(gpuGet(value(toGpu([1.0, 2.0])), 2)) == "get: index out of range: 2 not below length 2"
    assert message(gpuGet(value(toGpu([1.0, 2.0])), -1)) == "get: index out of range: -1 not below length 2"


def test_shapes_that_do_not_fit():
    x = value(toGpu([1.0, 2.0, 3.0, 4.0]))
    assert "matMul" in message(gpuMatMul(x, x, 2, 3, 2))
    assert "matMul" in message(gpuMatMul(x, x, -1, 2, 2))


def test_arguments_that_are_not_buffers():
    x = value(toGpu([1.0]))
    assert message(gpuMatMul(x, "x", 1, 1, 1)) == "gpuMatMul: argument 2 is a str, not an osprey Buffer"
    assert message(gpuMatMul([1.0], x, 1, 1, 1)) == "gpuMatMul: argument 1 is a list, not an osprey Buffer"
    assert message(fromGpu(3)) == "fromGpu: the argument is a int, not an osprey Buffer"
    assert message(gpuGet(None, 0)) == "gpuGet: the argument is a NoneType, not an osprey Buffer"
    with pytest.raises(OspreyError, match="gpuLength: the argument is a str"):
        gpuLength("x")


def test_values_that_are_not_numbers():
    assert message(toGpu("abc")) == "toGpu: takes numbers, not a str"
    assert message(toGpu(b"abc")) == "toGpu: takes numbers, not a bytes"
    assert message(toGpu([1.0, "x"])) == "toGpu: element 1 is a str, not a number"
    assert message(toGpu(5)) == "toGpu: takes a sequence of numbers, not a int"


def test_checkpoints_that_cannot_be_read(tmp_path):
    assert "no-such-file" in message(gpuLoadTensor(str(tmp_path / "no-such-file.safetensors"), "wte.weight"))
    done = run_cli("init", "--preset", "tiny", "--out", tmp_path / "tiny")
    assert done.returncode == 0
    missing = message(gpuLoadTensor(str(tmp_path / "tiny" / "model.safetensors"), "no.such.tensor"))
    assert "no.such.tensor" in missing


def test_devices_that_do_not_exist_are_the_clis_errors(monkeypatch):
    expected = cli_error("logits", "--backend", "gpu", "--device", "tpu", "--preset", "tiny", "--prompt", "hi")
    assert expected == "unknown gpu device `tpu`: choose host, cuda or opencl"
    assert message(toGpu([1.0], device="tpu")) == expected
    assert message(gpuLoadTensor("x", "y", device="tpu")) == expected
    with pytest.raises(OspreyError) as raised:
        gpuDevice("tpu")
    assert str(raised.value) == expected
    assert message(toGpu([1.0], device="")) == "an empty device name: choose host, cuda or opencl"
    assert message(toGpu([1.0], device=5)) == 'device is a int: choose "host", "cuda" or "opencl"'

    monkeypatch.setenv("OSPREY_GPU", "tpu")
    expected = cli_error("logits", "--backend", "gpu", "--preset", "tiny", "--prompt", "hi",
                         env_changes={"OSPREY_GPU": "tpu"})
    assert message(toGpu([1.0])) == expected == "unknown gpu device `tpu` (OSPREY_GPU): choose host, cuda or opencl"
    assert value(toGpu([1.0], device="host")).device == "host", "the argument wins over OSPREY_GPU"


def test_cuda_that_cannot_be_had_is_an_error_never_the_host(monkeypatch):
    if cuda_usable():
        pytest.skip("a CUDA device is here (test_cuda.py)")
    expected = cli_error("logits", "--backend", "gpu", "--device", "cuda", "--preset", "tiny", "--prompt", "hi")
    assert message(toGpu([1.0], device="cuda")) == expected
    monkeypatch.setenv("OSPREY_GPU", "cuda")
    assert message(toGpu([1.0])) == expected
    with pytest.raises(OspreyError):
        gpuDevice()
    if not osprey.built_with_cuda:
        assert expected.startswith("gpu device `cuda`: this program was built without nvcc")
    else:
        assert expected.startswith("no CUDA device")


def test_errors_leave_nothing_behind():
    x = value(toGpu([1.0, 2.0, 3.0, 4.0]))
    for _ in range(3):
        message(gpuGet(x, 10))
        message(gpuMatMul(x, x, 3, 3, 3))
        message(toGpu([1.0], device="tpu"))
    assert value(fromGpu(value(gpuMatMul(x, x, 2, 2, 2)))) == [7.0, 10.0, 15.0, 22.0]


# --- raw device pointers ---------------------------------------------------------------------------

def test_raw_device_pointers_both_ways():
    x = value(toGpu([1.0, 2.0, 3.0, 4.0]))
    address = osprey.rawDevicePtr(x)
    assert address == x.address != 0
    y = value(osprey.bufFromRawDevicePtr(address, 4, owner=x))
    assert y.address == address
    del x
    assert value(fromGpu(y)) == [1.0, 2.0, 3.0, 4.0], "the owner keeps the elements"


def test_a_raw_pointer_over_numpy_memory():
    host = np.array([1.0, 2.0, 3.0, 4.0])
    y = value(osprey.bufFromRawDevicePtr(host.ctypes.data, 4, device="host", owner=host))
    host[1] = 5.0
    assert value(gpuGet(y, 1)) == 5.0


def test_raw_pointers_that_cannot_be_buffers():
    host = np.zeros(4)
    assert message(osprey.bufFromRawDevicePtr(host.ctypes.data, -1)) == "bufFromRawDevicePtr: negative length -1"
    assert message(osprey.bufFromRawDevicePtr(0, 3)) == "bufFromRawDevicePtr: a null address for 3 elements"
    assert "is not aligned to the 8 bytes of an element" in message(
        osprey.bufFromRawDevicePtr(host.ctypes.data + 1, 2))
    assert message(osprey.bufFromRawDevicePtr(host.ctypes.data, 2, device="tpu")) == \
        "unknown gpu device `tpu`: choose host, cuda or opencl"
    with pytest.raises(OspreyError, match="rawDevicePtr: the argument is a ndarray"):
        osprey.rawDevicePtr(host)
