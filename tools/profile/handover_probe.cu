// What one hand-over between dependent phases of a decoding step costs (bench/cuda/NOTES.md,
// forty-ninth and fiftieth runs): as the recorded step makes it now, a kernel launched as a
// programmatic dependent of the one before (griddepcontrol: its blocks resident early, waiting for
// the whole earlier grid to finish and its writes to be visible), in a CUDA graph; and inside one
// persistent cooperative kernel three ways: each phase's end a count in global memory (the block's
// writes, a release fence, an atomic add) that every block's acquire loads wait for; a flag a block
// (a release store) that one warp of every block polls, every flag; and cooperative groups'
// grid.sync(). Every phase reads what every block of the phase before wrote (a block's value from
// another block), so a hand-over that let a reader through early would show as a wrong sum.
//
//   nvcc -O3 -arch=sm_90a -std=c++20 -o handover_probe tools/profile/handover_probe.cu
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kThreads = 128;
constexpr int kPhases = 64;

__device__ __forceinline__ void startDependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void awaitEarlier() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Phase p: block b adds the value block (b + 1) % blocks wrote in phase p - 1 to its own and writes
// it for phase p (values[p][b]); values[0] is the input.
__global__ void __launch_bounds__(kThreads) phaseKernel(double* values, int p) {
  startDependents();
  awaitEarlier();
  const int b = blockIdx.x, blocks = gridDim.x;
  if (threadIdx.x == 0)
    values[p * blocks + b] = values[(p - 1) * blocks + b] + values[(p - 1) * blocks + (b + 1) % blocks];
}

__device__ __forceinline__ unsigned loadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// The same phases in one launch: after its write, each block counts itself done with the phase
// (release), and waits until every block has (acquire) before the next phase reads.
__global__ void __launch_bounds__(kThreads) persistentKernel(double* values, unsigned* done, unsigned epoch) {
  const int b = blockIdx.x, blocks = gridDim.x;
  for (int p = 1; p <= kPhases; ++p) {
    if (threadIdx.x == 0) {
      values[p * blocks + b] = values[(p - 1) * blocks + b] + values[(p - 1) * blocks + (b + 1) % blocks];
      __threadfence();
      atomicAdd(done, 1u);
      const unsigned target = (epoch * kPhases + static_cast<unsigned>(p)) * static_cast<unsigned>(blocks);
      while (loadAcquire(done) < target) {
      }
    }
    __syncthreads();
  }
}

// The same phases with a flag a block instead of one count: block b's thread 0 stores its phase to
// flags[b] with release semantics (no atomic, no line shared by writers' read-modify-writes), and
// warp 0 of every block polls all the flags with acquire loads, a lane a flag in turn, until every
// block has reached the phase.
__device__ __forceinline__ void storeRelease(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__global__ void __launch_bounds__(kThreads) flagsKernel(double* values, unsigned* flags, unsigned epoch) {
  const int b = blockIdx.x, blocks = gridDim.x;
  for (int p = 1; p <= kPhases; ++p) {
    const unsigned target = epoch * kPhases + static_cast<unsigned>(p);
    if (threadIdx.x == 0) {
      values[p * blocks + b] = values[(p - 1) * blocks + b] + values[(p - 1) * blocks + (b + 1) % blocks];
      storeRelease(flags + b, target);
    }
    if (threadIdx.x < 32) {
      for (int f = static_cast<int>(threadIdx.x); f < blocks; f += 32)
        while (loadAcquire(flags + f) < target) {
        }
      __syncwarp();
    }
    __syncthreads();
  }
}

// The same phases with the cooperative groups' grid barrier.
__global__ void __launch_bounds__(kThreads) gridSyncKernel(double* values) {
  const int b = blockIdx.x, blocks = gridDim.x;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  for (int p = 1; p <= kPhases; ++p) {
    if (threadIdx.x == 0)
      values[p * blocks + b] = values[(p - 1) * blocks + b] + values[(p - 1) * blocks + (b + 1) % blocks];
    grid.sync();
  }
}

bool check(const double* device, int blocks, const std::vector<double>& expect, const char* what) {
  std::vector<double> got(expect.size());
  cudaMemcpy(got.data(), device, got.size() * sizeof(double), cudaMemcpyDeviceToHost);
  const bool same = std::memcmp(got.data(), expect.data(), got.size() * sizeof(double)) == 0;
  if (!same) std::printf("%s: WRONG values\n", what);
  return same;
}

}  // namespace

int main() {
  int device = 0, multiprocessors = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, device);
  std::printf("%s, %d multiprocessors\n", props.name, multiprocessors);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);

  for (const int blocks : {multiprocessors, 2 * multiprocessors}) {
    const std::size_t n = static_cast<std::size_t>(kPhases + 1) * blocks;
    // Host and device make the same additions of the same doubles, so the same values, exact or not.
    std::vector<double> expect(n);
    for (int b = 0; b < blocks; ++b) expect[b] = b % 2;
    for (int p = 1; p <= kPhases; ++p)
      for (int b = 0; b < blocks; ++b)
        expect[p * blocks + b] = expect[(p - 1) * blocks + b] + expect[(p - 1) * blocks + (b + 1) % blocks];
    double* values;
    unsigned* done;
    cudaMalloc(&values, n * sizeof(double));
    cudaMalloc(&done, sizeof(unsigned));
    auto reset = [&] { cudaMemcpy(values, expect.data(), blocks * sizeof(double), cudaMemcpyHostToDevice); };

    // The graph of programmatic dependents.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    for (int p = 1; p <= kPhases; ++p) {
      cudaLaunchAttribute overlap{};
      overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      overlap.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(blocks);
      config.blockDim = dim3(kThreads);
      config.stream = stream;
      config.attrs = &overlap;
      config.numAttrs = 1;
      cudaLaunchKernelEx(&config, phaseKernel, values, p);
    }
    cudaStreamEndCapture(stream, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    // One launch from the input, checked; then kReps launches timed.
    constexpr int kReps = 20;
    struct Timed {
      float ms = 0;
      bool right = false;
    };
    auto measure = [&](auto launch, const char* what) {
      Timed t;
      reset();
      launch();
      cudaStreamSynchronize(stream);
      t.right = check(values, blocks, expect, what);
      cudaEventRecord(e0, stream);
      for (int r = 0; r < kReps; ++r) launch();
      cudaEventRecord(e1, stream);
      cudaEventSynchronize(e1);
      cudaEventElapsedTime(&t.ms, e0, e1);
      return t;
    };
    const Timed graphed = measure([&] { cudaGraphLaunch(exec, stream); }, "graph");

    // The persistent kernels, cooperative so that every block is resident.
    int fits = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, persistentKernel, kThreads, 0);
    Timed counted, flagged, synced;
    if (fits * multiprocessors >= blocks) {
      auto cooperative = [&](auto kernel, auto... params) {
        void* args[] = {&params...};
        cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel), dim3(blocks), dim3(kThreads), args, 0, stream);
      };
      cudaMemset(done, 0, sizeof(unsigned));
      unsigned epoch = 0;  // the launches so far: each phase's count goes on from the last launch's
      counted = measure([&] { cooperative(persistentKernel, values, done, epoch++); }, "persistent");
      unsigned* flags;
      cudaMalloc(&flags, blocks * sizeof(unsigned));
      cudaMemset(flags, 0, blocks * sizeof(unsigned));
      unsigned flagEpoch = 0;
      flagged = measure([&] { cooperative(flagsKernel, values, flags, flagEpoch++); }, "flags");
      cudaFree(flags);
      synced = measure([&] { cooperative(gridSyncKernel, values); }, "grid sync");
    }
    const double each = 1000.0 / (kReps * kPhases);
    std::printf("%d blocks: programmatic dependents in a graph %.2f us a hand-over (%s); "
                "persistent, counts in memory %.2f us (%s); persistent, a flag a block %.2f us (%s); "
                "persistent, grid.sync %.2f us (%s); %s\n",
                blocks, graphed.ms * each, graphed.right ? "right" : "WRONG", counted.ms * each,
                counted.right ? "right" : "WRONG", flagged.ms * each, flagged.right ? "right" : "WRONG",
                synced.ms * each, synced.right ? "right" : "WRONG",
                cudaGetErrorString(cudaGetLastError()));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFree(values);
    cudaFree(done);
  }
  return 0;
}
