// The flash attention kernels with bf16 tiles two ways, mma.sync (flash_attention.hpp) and Hopper's
// warpgroup products (flash_forward_wgmma.hpp, flash_backward_wgmma.hpp), launched alone at one
// shape: first checked to give the same bits (out, the log-sum-exps, dq, dk, dv), then timed as
// bench/peers/torch_attention.py times PyTorch's backends (calls queued back to back between two
// CUDA events), so the figures compare with cuDNN's and FlashAttention-2's. An H100/H200 only.
//
//   nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a -DOSPREY_CUDA_WGMMA --extended-lambda -DFMT_USE_CONSTEXPR=1 \
//        -DFMT_HEADER_ONLY -Iinclude -Iexamples -o flash_kernels_probe tools/profile/flash_kernels_probe.cu
//   ./flash_kernels_probe [T B NH]      (default 1024 16 12: GPT-2 124M's training shape)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "gpt2/fast/flash_backward_wgmma.hpp"
#include "gpt2/fast/flash_forward_wgmma.hpp"

// At file scope, with no unnamed namespace of this file's own: nvcc's kernel stubs then name the
// headers' unnamed-namespace kernels unambiguously.
using namespace gpt2::fast_kernels;

static __global__ void roundToBf16(__nv_bfloat16* out, const float* in, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

template <class T>
static T* deviceArray(std::size_t n) {
  T* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) {
    std::fprintf(stderr, "flash_kernels_probe: cudaMalloc of %zu bytes failed\n", n * sizeof(T));
    std::exit(1);
  }
  return p;
}

static std::vector<float> hostCopy(const float* p, std::size_t n) {
  std::vector<float> v(n);
  cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
  return v;
}

// Microseconds a call of f: 20 calls queued between two events, after 3.
template <class F>
static float perCall(F f) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t start, end;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  cudaEventRecord(start);
  for (int i = 0; i < 20; ++i) f();
  cudaEventRecord(end);
  cudaEventSynchronize(end);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, end);
  return ms * 1000.f / 20.f;
}

int main(int argc, char** argv) {
  const long T = argc > 1 ? std::atol(argv[1]) : 1024, B = argc > 2 ? std::atol(argv[2]) : 16;
  const long NH = argc > 3 ? std::atol(argv[3]) : 12, C = 64 * NH;
  if (!wgmmaReady()) {
    std::fprintf(stderr, "flash_kernels_probe: no sm_90a code for this device (an H100/H200 is needed)\n");
    return 1;
  }
  const long nQkv = B * T * 3 * C, nOut = B * T * C, nStats = B * NH * T;
  std::vector<float> qkvHost(nQkv), doutHost(nOut);
  std::mt19937 random(1);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (float& x : qkvHost) x = uniform(random);
  for (float& x : doutHost) x = uniform(random);
  float* qkv = deviceArray<float>(nQkv);
  float* dout = deviceArray<float>(nOut);
  auto* qkvTwin = deviceArray<__nv_bfloat16>(nQkv);
  auto* doutTwin = deviceArray<__nv_bfloat16>(nOut);
  auto* dsT = deviceArray<std::uint32_t>(flashDsWords(B, T, NH));
  float *out[2], *lse[2], *rowDot[2], *dqkv[2];
  for (int k = 0; k < 2; ++k)
    out[k] = deviceArray<float>(nOut), lse[k] = deviceArray<float>(nStats), rowDot[k] = deviceArray<float>(nStats),
    dqkv[k] = deviceArray<float>(nQkv);
  cudaMemcpy(qkv, qkvHost.data(), nQkv * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dout, doutHost.data(), nOut * sizeof(float), cudaMemcpyHostToDevice);
  roundToBf16<<<static_cast<unsigned>((nQkv + 255) / 256), 256>>>(qkvTwin, qkv, nQkv);
  const TileSource qkvTiles{qkv, qkvTwin}, doutTiles{dout, doutTwin};
  const auto forward = [&](int k) {
    return k == 0 ? flashAttentionForward<Bf16Tiles>(nullptr, qkvTiles, {out[k]}, lse[k], B, T, C, NH)
                  : flashAttentionForwardWgmma(nullptr, qkvTiles, {out[k]}, lse[k], B, T, C, NH);
  };
  const auto backward = [&](int k) {
    return k == 0 ? flashAttentionBackward<Bf16Tiles>(nullptr, doutTiles, qkvTiles, lse[k], rowDot[k], {dqkv[k]}, B,
                                                      T, C, NH, dsT)
                  : flashAttentionBackwardWgmma(nullptr, doutTiles, qkvTiles, lse[k], rowDot[k], {dqkv[k]}, B, T, C,
                                                NH, dsT);
  };
  for (int k = 0; k < 2; ++k) {
    if (!forward(k).ok() || !flashRowDotsOf(nullptr, dout, out[k], rowDot[k], doutTwin, B, T, C, NH).ok() ||
        !backward(k).ok() || cudaDeviceSynchronize() != cudaSuccess) {
      std::fprintf(stderr, "flash_kernels_probe: a launch failed\n");
      return 1;
    }
  }
  const bool same = hostCopy(out[0], nOut) == hostCopy(out[1], nOut) &&
                    hostCopy(lse[0], nStats) == hostCopy(lse[1], nStats) &&
                    hostCopy(dqkv[0], nQkv) == hostCopy(dqkv[1], nQkv);
  std::printf("B %ld NH %ld T %ld head size 64: mma.sync and warpgroup kernels %s\n", B, NH, T,
              same ? "give the same bits (out, lse, dq, dk, dv)" : "DIFFER");
  if (!same) return 1;
  const char* names[2] = {"mma.sync", "warpgroup"};
  for (int k = 0; k < 2; ++k)
    std::printf("%-9s forward %.1f us, backward (keys + queries) %.1f us, row dots %.1f us\n", names[k],
                perCall([&] { (void)forward(k); }), perCall([&] { (void)backward(k); }),
                perCall([&] { (void)flashRowDotsOf(nullptr, dout, out[k], rowDot[k], doutTwin, B, T, C, NH); }));
  return 0;
}
