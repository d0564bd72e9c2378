// A stream capture that an error left open, ended on the way out of its scope so the stream is
// usable again (RecordedGraph::record, osprey/gpu/cuda/recorded_graph.hpp).
// nvcc units only.
#pragma once

#include <cuda_runtime.h>

namespace osprey {

struct OpenCapture {
  cudaStream_t stream;
  bool open = true;  // set false once the capture has been ended and its graph taken
  ~OpenCapture() {
    if (!open) return;
    cudaGraph_t abandoned = nullptr;
    (void)cudaStreamEndCapture(stream, &abandoned);
    if (abandoned) (void)cudaGraphDestroy(abandoned);
    (void)cudaGetLastError();
  }
};

}  // namespace osprey
