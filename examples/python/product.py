# The seed's first program: lift [1, 2, 3, 4] onto the device, multiply it as a 2x2 matrix by
# itself, read element 0 back. Each fallible call returns a Result, taken apart with `match`.
#
#   OSPREY_GPU=host osprey examples/python/product.py --run     # host: first element = 7.0
#   OSPREY_GPU=cuda osprey examples/python/product.py --run     # cuda: NVIDIA H200: first element = 7.0
#   OSPREY_GPU=opencl osprey examples/python/product.py --run   # opencl: pocl cpu: first element = 7.0
#
# (`python3 examples/python/product.py` runs it too, with the module on PYTHONPATH.)
from osprey import Error, Success, gpuDevice, gpuGet, gpuMatMul, toGpu

match toGpu([1.0, 2.0, 3.0, 4.0]):
    case Error(message=message):
        raise SystemExit(f"error: {message}")
    case Success(value=buffer):
        match gpuMatMul(buffer, buffer, 2, 2, 2):
            case Error(message=message):
                raise SystemExit(f"error: {message}")
            case Success(value=product):
                match gpuGet(product, 0):
                    case Error(message=message):
                        raise SystemExit(f"error: {message}")
                    case Success(value=value):
                        print(f"{gpuDevice()}: first element = {value}")
