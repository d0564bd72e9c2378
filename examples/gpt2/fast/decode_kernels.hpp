// The fast handler's kernels for one-row work, the shape of batch-1 decoding: a linear layer on one
// row with its bias and the next layer's element-wise work in the same kernel, attention of one
// query against the key/value cache, and the greedy argmax on the device. nvcc units only.
//
// Decoding reads every weight once per token, so these are bandwidth kernels: a warp per output
// streams one weight row with 16-byte loads. The formulas are the reference's (model.hpp's
// linear, linearGelu, linearResidual; attention.hpp's attentionDecode; generate.hpp's greedyToken),
// in float.
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/fast/decode_kernels.hpp is compiled by nvcc only"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "gpt2/fast/causal_softmax.hpp"  // warpSum, warpMax
#include "gpt2/fast/row_kernels.hpp"     // kGeluScaleF, kGeluCubicF
#include "osprey/config.hpp"

namespace gpt2::fast_kernels {

// What a one-row linear layer writes for output o, given y = (x · W)[o] + bias[o] and what
// `operand(o)` read of an earlier kernel's output (read as soon as that kernel is done, so that
// its latency passes while the product is summed).
struct Biased {
  __device__ float operand(int) const { return 0.0f; }
  __device__ float operator()(int, float y, float) const { return y; }
};
struct GeluOf {
  __device__ float operand(int) const { return 0.0f; }
  __device__ float operator()(int, float y, float) const {
    return (0.5f * y) * (1.0f + tanhf(kGeluScaleF * (y + kGeluCubicF * (y * y) * y)));
  }
};
struct PlusResidual {
  const float* residual;
  __device__ float operand(int o) const { return residual[o]; }
  __device__ float operator()(int, float y, float residualValue) const { return residualValue + y; }
};

// What a one-row linear layer does to its input row first: nothing, or the LayerNorm in front of
// it (normLinear), computed exactly as layerNormForward computes it (the same sums in the same
// order, so the same floats) into shared memory by every block.
struct RowAsIs {};
struct RowNormalised {
  const float* weight;
  const float* bias;
  float eps;
};

namespace {  // internal linkage (osprey/gpu/cuda.hpp says why)

constexpr int kRowWarpsPerBlock = 8;
// A lane's loads of one weight row are issued kRowLoadsInFlight at a time before any is used: a
// decoding step is a chain of small products, each too short to hide a load's latency otherwise.
constexpr int kRowLoadsInFlight = 4;

// How many warps share one output row (1, 2, 4 or 8): enough warps in all (about 2048, half of
// what the multiprocessors hold, so that the next kernel's blocks fit beside them) to keep every
// multiprocessor's loads in flight, and few enough loads per lane to issue them all at once.
inline int rowSplit(int IC, int OC) {
  int split = 1;
  while (split < kRowWarpsPerBlock && (OC * split < 2048 || IC > 128 * kRowLoadsInFlight * split)) split *= 2;
  return split;
}

// Programmatic dependent launch (sm_90): a kernel launched by launchOverlapped may start while the
// kernel before it on the stream is still running. It lets its own successor start at once
// (startDependents), does what needs nothing from earlier kernels (loading weights), and waits for
// every earlier kernel to finish and its writes to be visible (awaitEarlierKernels) before it reads
// an activation or writes anything. Launched the ordinary way, both are no-ops.
__device__ __forceinline__ void startDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void awaitEarlierKernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// y[o] = then(o, Σ_k wT[o][k]·x[k] + bias[o]) for o < OC; wT (OC, IC) row-major, bias may be null.
// With RowNormalised, x is first replaced by its LayerNorm (IC floats of dynamic shared memory).
// `split` warps share a row (rowSplit): lane l of the row's warp p takes every (32·split)-th
// element from (32·p + l), in ascending k; the warps' sums are added in warp order. The grouping
// depends only on (IC, OC), so a layer gives the same floats on every call. The first batch of
// weights is loaded before waiting for the kernel that writes x.
template <class Then, class Row = RowAsIs>
__global__ void __launch_bounds__(kRowWarpsPerBlock * 32)
    linearRow(float* y, const float* wT, const float* x, const float* bias, int IC, int OC, int split, Then then,
              Row row = {}) {
  __shared__ float warpSums[kRowWarpsPerBlock];
  startDependents();
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int o = static_cast<int>(blockIdx.x) * (kRowWarpsPerBlock / split) + warp / split;
  const int start = (warp % split) * 32 + lane, stride = 32 * split;
  const bool vectors = IC % 4 == 0;  // rows start on 16 bytes: vector loads
  const int n4 = IC / 4;
  const float4* w4 = reinterpret_cast<const float4*>(wT + static_cast<osprey::Index>(o < OC ? o : 0) * IC);
  float4 a[kRowLoadsInFlight];
  const auto load = [&](int first) {
#pragma unroll
    for (int u = 0; u < kRowLoadsInFlight; ++u)
      if (first + stride * u < n4) a[u] = __ldcs(w4 + first + stride * u);  // streamed: read once a token
  };
  if (vectors && o < OC) load(start);
  const bool writes = o < OC && lane == 0 && warp % split == 0;  // the lane that writes y[o]
  const float biasValue = writes && bias ? bias[o] : 0.0f;
  // The LayerNorm's weight and bias for this thread's elements (rows up to kNormalisedInRegisters
  // times the block; longer rows read them where they are used).
  constexpr int kNormalisedInRegisters = 4;
  float normWeight[kNormalisedInRegisters], normBias[kNormalisedInRegisters];
  if constexpr (std::is_same_v<Row, RowNormalised>) {
#pragma unroll
    for (int j = 0; j < kNormalisedInRegisters; ++j) {
      const int c = static_cast<int>(threadIdx.x) + j * static_cast<int>(blockDim.x);
      normWeight[j] = c < IC ? row.weight[c] : 0.0f;
      normBias[j] = c < IC ? row.bias[c] : 0.0f;
    }
  }
  awaitEarlierKernels();
  const float operand = writes ? then.operand(o) : 0.0f;

  if constexpr (std::is_same_v<Row, RowNormalised>) {
    extern __shared__ float4 normalisedRow[];
    float* xs = reinterpret_cast<float*>(normalisedRow);
    __shared__ float statistics[2];
    for (int c = static_cast<int>(threadIdx.x); c < IC; c += static_cast<int>(blockDim.x)) xs[c] = x[c];
    __syncthreads();
    if (threadIdx.x < 32) {  // layerNormForward's warp, lane for lane
      float sum = 0.0f;
#pragma unroll 8
      for (int c = lane; c < IC; c += 32) sum += xs[c];
      const float m = warpSum(sum) / static_cast<float>(IC);
      float squares = 0.0f;
#pragma unroll 8
      for (int c = lane; c < IC; c += 32) {
        const float d = xs[c] - m;
        squares += d * d;
      }
      const float s = rsqrtf(warpSum(squares) / static_cast<float>(IC) + row.eps);
      if (lane == 0) {
        statistics[0] = m;
        statistics[1] = s;
      }
    }
    __syncthreads();
    const float m = statistics[0], s = statistics[1];
    const int threads = static_cast<int>(blockDim.x);
#pragma unroll
    for (int j = 0; j < kNormalisedInRegisters; ++j) {
      const int c = static_cast<int>(threadIdx.x) + j * threads;
      if (c < IC) xs[c] = ((xs[c] - m) * s) * normWeight[j] + normBias[j];
    }
    for (int c = static_cast<int>(threadIdx.x) + kNormalisedInRegisters * threads; c < IC; c += threads)
      xs[c] = ((xs[c] - m) * s) * row.weight[c] + row.bias[c];
    __syncthreads();
    x = xs;
  }
  float acc = 0.0f;
  if (o < OC) {
    if (vectors) {
      const float4* x4 = reinterpret_cast<const float4*>(x);
      for (int first = start; first < n4; first += stride * kRowLoadsInFlight) {
        if (first != start) load(first);
#pragma unroll
        for (int u = 0; u < kRowLoadsInFlight; ++u)
          if (first + stride * u < n4) {
            const float4 b = x4[first + stride * u];
            acc += a[u].x * b.x + a[u].y * b.y + a[u].z * b.z + a[u].w * b.w;
          }
      }
    } else {
      const float* w = wT + static_cast<osprey::Index>(o) * IC;
      for (int k = start; k < IC; k += stride) acc += w[k] * x[k];
    }
  }
  acc = warpSum(acc);
  if (split == 1) {
    if (writes) y[o] = then(o, bias ? acc + biasValue : acc, operand);
    return;
  }
  if (lane == 0) warpSums[warp] = acc;
  __syncthreads();
  if (writes) {
    float total = warpSums[warp];
    for (int p = 1; p < split; ++p) total += warpSums[warp + p];
    y[o] = then(o, bias ? total + biasValue : total, operand);
  }
}

// One query (qkvRow's q, NH heads of hs) against Tc cached keys and values (Tc, C): a block per
// head. pre[t2] = q·k[t2] / sqrt(hs); att = softmax(pre); out[hh·hs + d] = Σ att[t2]·v[t2][hh·hs + d].
// A recorded decoding step (fast/decode_graph.hpp) reads the position from the device instead
// (`position`: Tc = *position + 1) and first writes the new position's key and value, qkvRow's
// columns [C, 2C) and [2C, 3C), into row Tc - 1 of the cache, which has room for it (`append`);
// each block writes and reads only its own head's columns.
// HS: the head size when it is known at compile time (64, GPT-2's: each key is then 16 vector
// loads issued together, with C a multiple of 4), else 0 and hs.
constexpr int kDecodeThreads = 1024;  // 16 groups of 64 channels share the sum over positions
constexpr int kDecodeMaxPositions = 1024;  // GPT-2's context; checked by the caller
constexpr int kDecodeValuesInFlight = 8;   // value rows a thread loads before adding them
template <int HS>
__global__ void __launch_bounds__(kDecodeThreads)
    attendOneRow(float* out, const float* qkvRow, float* keys, float* values, int Tc, int C, int hs, float scale,
                 const int* position = nullptr, bool append = false) {
  __shared__ float pre[kDecodeMaxPositions];
  __shared__ float scratch[kDecodeThreads / 32];
  __shared__ float partial[kDecodeThreads];
  __shared__ float4 query4[kDecodeThreads / 4];
  float* query = reinterpret_cast<float*>(query4);
  if constexpr (HS > 0) hs = HS;
  startDependents();
  if (position) Tc = *position + 1;  // written by the previous replay, which has finished
  awaitEarlierKernels();
  const int hh = static_cast<int>(blockIdx.x), tid = static_cast<int>(threadIdx.x);
  if (tid < hs) {
    query[tid] = qkvRow[hh * hs + tid];
    if (append) {
      const osprey::Index at = static_cast<osprey::Index>(Tc - 1) * C + hh * hs + tid;
      keys[at] = qkvRow[C + hh * hs + tid];
      values[at] = qkvRow[2 * C + hh * hs + tid];
    }
  }
  __syncthreads();
  float m = -INFINITY;
  for (int t2 = tid; t2 < Tc; t2 += kDecodeThreads) {
    const float* k = keys + static_cast<osprey::Index>(t2) * C + hh * hs;
    float s = 0.0f;
    if constexpr (HS > 0) {
      const float4* k4 = reinterpret_cast<const float4*>(k);
      float4 a[HS / 4];
#pragma unroll
      for (int d4 = 0; d4 < HS / 4; ++d4) a[d4] = k4[d4];
#pragma unroll
      for (int d4 = 0; d4 < HS / 4; ++d4) {
        const float4 b = query4[d4];
        s += a[d4].x * b.x + a[d4].y * b.y + a[d4].z * b.z + a[d4].w * b.w;
      }
    } else {
      for (int d = 0; d < hs; ++d) s += query[d] * k[d];
    }
    pre[t2] = s * scale;
    m = fmaxf(m, pre[t2]);
  }
  m = blockFold<true, kDecodeThreads>(m, scratch);
  float sum = 0.0f;
  for (int t2 = tid; t2 < Tc; t2 += kDecodeThreads) {
    pre[t2] = __expf(pre[t2] - m);
    sum += pre[t2];
  }
  sum = blockFold<false, kDecodeThreads>(sum, scratch);  // its barriers also publish pre[]
  const float inverse = 1.0f / sum;
  // Thread tid adds the positions t2 ≡ tid / hs (mod groups) for channel tid % hs.
  const int groups = kDecodeThreads / hs, d = tid % hs, group = tid / hs;
  float acc = 0.0f;
  if (group < groups) {
    const float* v = values + hh * hs + d;
    for (int first = group; first < Tc; first += groups * kDecodeValuesInFlight) {
      float held[kDecodeValuesInFlight];
#pragma unroll
      for (int u = 0; u < kDecodeValuesInFlight; ++u) {
        const int t2 = first + u * groups;
        held[u] = t2 < Tc ? v[static_cast<osprey::Index>(t2) * C] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kDecodeValuesInFlight; ++u)
        if (first + u * groups < Tc) acc += pre[first + u * groups] * held[u];
    }
  }
  partial[tid] = acc;
  __syncthreads();
  if (tid < hs) {
    float total = 0.0f;
    for (int g = 0; g < groups; ++g) total += partial[g * hs + tid];
    out[hh * hs + tid] = total * inverse;
  }
}

// The smallest index of the largest non-NaN value of x (n), as a float (exact below 2^24), or -1
// when every value is NaN. One block. A recorded decoding step also moves its position on by one
// (`advance`), after every kernel of the step has read it, and writes the token for the host into
// `byPosition` at the position it was chosen for (mapped pinned memory: no copy to wait for).
constexpr int kArgmaxThreads = 1024;
__global__ void __launch_bounds__(kArgmaxThreads)
    argmaxKernel(float* result, const float* x, int n, int* advance = nullptr, int* byPosition = nullptr) {
  __shared__ float bestValue[kArgmaxThreads];
  __shared__ int bestIndex[kArgmaxThreads];
  startDependents();
  awaitEarlierKernels();
  const int tid = static_cast<int>(threadIdx.x);
  float best = -INFINITY;
  int at = -1;
#pragma unroll 8
  for (int i = tid; i < n; i += kArgmaxThreads) {
    const float v = x[i];
    if (v == v && (at < 0 || v > best)) {  // ascending i: the first of equal values stays
      best = v;
      at = i;
    }
  }
  bestValue[tid] = best;
  bestIndex[tid] = at;
  __syncthreads();
  for (int stride = kArgmaxThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      const int j = bestIndex[tid + stride];
      const float v = bestValue[tid + stride];
      const int i = bestIndex[tid];
      if (j >= 0 && (i < 0 || v > bestValue[tid] || (v == bestValue[tid] && j < i))) {
        bestValue[tid] = v;
        bestIndex[tid] = j;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {
    *result = static_cast<float>(bestIndex[0]);
    if (advance) {
      if (byPosition) byPosition[*advance] = bestIndex[0];
      ++*advance;
    }
  }
}

// out (C) = wte[token] + wpe[position], the encoder for one new token whose id (a float) and
// position are on the device: a recorded decoding step. The same sum as the reference encoder's
// (a float sum rounded once). An id outside [0, V), which only an argmax that found no maximum
// leaves, gives NaNs: the step's own argmax then reports the failure again.
__global__ void embedOne(float* out, const float* token, const float* wte, const float* wpe, const int* position,
                         int C, int V) {
  startDependents();
  awaitEarlierKernels();
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  const float id = *token;
  if (!(id >= 0.0f && id < static_cast<float>(V))) {
    out[c] = NAN;
    return;
  }
  out[c] = wte[static_cast<osprey::Index>(id) * C + c] + wpe[static_cast<osprey::Index>(*position) * C + c];
}

}  // namespace

// kernel<<<grid, block, shared, stream>>>(args...), allowed to overlap the end of the kernel before
// it (programmatic dependent launch; the kernel awaits it: awaitEarlierKernels) on a stream of the
// handler's own. The legacy default stream launches the ordinary way.
template <class... Params, class... Args>
cudaError_t launchOverlapped(dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream, void (*kernel)(Params...),
                             Args&&... args) {
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = stream ? &overlap : nullptr;
  config.numAttrs = stream ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}
}  // namespace gpt2::fast_kernels
