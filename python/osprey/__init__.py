"""Osprey from Python: the GPU surface, zero-copy exchange with NumPy and PyTorch, and GPT-2.

    from osprey import Error, Success, gpuDevice, gpuGet, gpuMatMul, toGpu

    match toGpu([1.0, 2.0, 3.0, 4.0]):
        case Success(value=buffer): ...
        case Error(message=message): ...

The device is "host" (every CPU core), "cuda" (an NVIDIA GPU) or "opencl" (any OpenCL device with
doubles, kernels traced to OpenCL C; where the module was built with OpenCL: built_with_opencl):
the `device` argument, else $OSPREY_GPU, else host. A device that cannot be had is an Error (or
OspreyError), never a quiet run on the CPU.

Buffers hold doubles. A host Buffer is a NumPy array without a copy (numpy.asarray(buffer)); a host
or cuda Buffer is shared through DLPack (numpy.from_dlpack, torch.from_dlpack), an opencl one is
copied back with fromGpu; from_dlpack / from_buffer make a Buffer over another library's float64
memory in place.
"""

from . import _osprey
from ._osprey import (
    Buffer,
    bufFromRawDevicePtr,
    from_buffer,
    from_dlpack,
    fromGpu,
    gpuDevice,
    gpuGet,
    gpuLength,
    gpuLoadTensor,
    gpuMatMul,
    rawDevicePtr,
    toGpu,
)
from .result import Error, OspreyError, Success

built_with_cuda: bool = _osprey.built_with_cuda
built_with_opencl: bool = _osprey.built_with_opencl

from . import gpt2  # noqa: E402  (after the names it uses)

__all__ = [
    "Buffer",
    "Error",
    "OspreyError",
    "Success",
    "bufFromRawDevicePtr",
    "built_with_cuda",
    "built_with_opencl",
    "fromGpu",
    "from_buffer",
    "from_dlpack",
    "gpt2",
    "gpuDevice",
    "gpuGet",
    "gpuLength",
    "gpuLoadTensor",
    "gpuMatMul",
    "rawDevicePtr",
    "toGpu",
]
