// osprey-differential-nvcc: driver.cpp compiled by nvcc, so the model's host code (every kernel
// an extended __host__ __device__ lambda, every header through nvcc's front end and cudafe++)
// runs the lists and gpu/host handlers, and its dump must equal the host compilers' bit for bit.
//
// Only nvcc's host pass sees it: this program launches no kernel, so the device pass has nothing
// to compile (and cicc 13.0 crashes on the lists and host handlers' instantiations).
#if !defined(__CUDA_ARCH__)
#include "driver.cpp"
#endif
