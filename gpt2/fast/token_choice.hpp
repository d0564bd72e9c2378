// The greedy choice on the device and what follows it (fast/decode_kernels.hpp): room for the
// argmax's candidates, the argmax's launch, and the one-token embedding that a recorded decoding
// step reads (fast/decode_recorder.hpp). The handler's greedyToken and the decode recorder launch
// them on the device's stream. nvcc units only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include <fmt/format.h>

#include "gpt2/fast/decode_kernels.hpp"
#include "gpt2/fast/launch_checks.hpp"
#include "osprey/gpu/cuda/fast.hpp"

namespace gpt2::fast_detail {

// Room for `slots` blocks' candidates and their ticket (fast_kernels::Candidates), zeroed on the
// device's stream; each launch that uses it leaves the ticket zero, so a recording zeroes it once,
// before it records. The caller keeps it for as long as the launch may run (a recording: as long
// as it is replayed).
using CandidateRoom = osprey::GpuBuffer<osprey::CudaDevice, int>;
inline osprey::Result<CandidateRoom> candidateRoom(const std::shared_ptr<osprey::CudaDevice>& device, int slots) {
  const osprey::Index ints = 2 * osprey::Index{slots} + 1;
  CandidateRoom room(device, OSPREY_TRY(device->allocate<int>(ints)), ints);
  OSPREY_CUDA_CHECK(cudaMemsetAsync(room.data(), 0, static_cast<std::size_t>(ints) * sizeof(int), device->stream()),
                    "zeroing the argmax's ticket");
  return room;
}

// The device-side argmax of logits into *result (fast_kernels::argmaxKernel; position and
// byPosition as it says), its candidates in `room` (candidateRoom(kArgmaxBlocks)).
inline osprey::Result<void> launchArgmax(cudaStream_t stream, float* result, const osprey::Fast::Buffer& logits,
                                         const CandidateRoom& room, int* position, int* byPosition) {
  const int n = OSPREY_TRY(intWidth("generate", logits.size()));
  if (n >= (1 << 24)) return osprey::Error{"generate: more than 2^24 logits"};
  OSPREY_CUDA_CHECK(fast_kernels::launchOverlapped(fast_kernels::kArgmaxBlocks, fast_kernels::kArgmaxThreads, 0, stream,
                                                   fast_kernels::argmaxKernel, result, logits.data(), n,
                                                   fast_kernels::candidatesIn(room.data(), fast_kernels::kArgmaxBlocks),
                                                   position, byPosition),
                    "fast argmax launch");
  return {};
}

// out (C) = wte[token] + wpe[*position] (fast_kernels::embedOne), token and position on the device.
inline osprey::Result<void> launchEmbedding(cudaStream_t stream, const osprey::Fast::Buffer& out,
                                            const osprey::Fast::Buffer& token, const osprey::Fast::Buffer& wte,
                                            const osprey::Fast::Buffer& wpe, const int* position, int C) {
  const char* L = "encoder (recorded decoding step)";
  if (wte.size() % C != 0 || wpe.size() % C != 0)
    return osprey::Error{fmt::format("{}: wte ({}) and wpe ({}) must be whole rows of {} channels", L, wte.size(),
                                     wpe.size(), C)};
  const int V = OSPREY_TRY(intWidth(L, wte.size() / C));
  constexpr int threads = 256;
  OSPREY_CUDA_CHECK(fast_kernels::launchOverlapped(static_cast<unsigned>((C + threads - 1) / threads), threads, 0,
                                                   stream, fast_kernels::embedOne, out.data(), token.data(), wte.data(),
                                                   wpe.data(), position, C, V),
                    "fast one-token encoder launch");
  return {};
}

}  // namespace gpt2::fast_detail
