// A step of work recorded once as a CUDA graph and replayed many times: for work of many small
// launches that would cost more to launch one by one from the host than they compute (a model's
// decoding step, one token at a time). It owns what recording and replaying need, and gives it
// back in order:
//
//   * a stream of its own (the legacy default stream cannot be captured), made the device's for
//     the recording and its replays, and ordered after what the device's stream held before, on
//     the device: the host records while the device still runs that earlier work;
//   * the captured graph and its instance (record: a capture that the body's error leaves open
//     is ended, OpenCapture);
//   * the events the host waits on: the first result, written before the first replay, and the
//     replays, queued at most one ahead of the one the host waits for (two events, in turn);
//   * pinned host memory, mapped for the device, that the replays write their results to, so the
//     host reads them without a copy.
//
// While it lives the device's released blocks are held (CudaDevice::holdReleases: a replay writes
// the very blocks the recording used). When it goes, it waits for its last replay, then gives the
// device its stream and its releases back. `name` says which recording an error is about. nvcc
// units only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/cuda/open_capture.hpp"

namespace osprey {

class RecordedGraph {
 public:
  RecordedGraph(std::shared_ptr<CudaDevice> device, const char* name) : m_device(std::move(device)), m_name(name) {}
  RecordedGraph(const RecordedGraph&) = delete;
  RecordedGraph& operator=(const RecordedGraph&) = delete;
  ~RecordedGraph() {
    // Best effort, as any release: a CUDA error here has already been reported by a replay's wait.
    end();
    if (m_begun) {
      m_device->setStream(nullptr);
      m_device->holdReleases(false);
    }
    for (cudaEvent_t e : m_done)
      if (e) (void)cudaEventDestroy(e);
    if (m_first) (void)cudaEventDestroy(m_first);
    if (m_stream) (void)cudaStreamDestroy(m_stream);
    if (m_pinned) (void)cudaFreeHost(m_pinned);
  }

  // The stream, made the device's after what the device's stream holds; `pinnedBytes` of pinned,
  // mapped host memory (pinned, pinnedOnDevice).
  Result<void> begin(std::size_t pinnedBytes) {
    OSPREY_CUDA_CHECK(cudaStreamCreate(&m_stream), fmt::format("creating {}'s stream", m_name));
    for (cudaEvent_t* e : {&m_done[0], &m_done[1], &m_first})
      OSPREY_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming),
                        fmt::format("creating {}'s events", m_name));
    OSPREY_CUDA_CHECK(cudaHostAlloc(&m_pinned, pinnedBytes, cudaHostAllocMapped),
                      fmt::format("allocating {}'s read-back", m_name));
    OSPREY_CUDA_CHECK(cudaHostGetDevicePointer(&m_pinnedOnDevice, m_pinned, 0), "mapping the read-back");
    // No wait for the device: the stream's work waits on the device for what the device's stream
    // holds, and the host records meanwhile. (m_first is reused for the first result.)
    OSPREY_CUDA_CHECK(cudaEventRecord(m_first, m_device->stream()), "marking the work before the recording");
    OSPREY_CUDA_CHECK(cudaStreamWaitEvent(m_stream, m_first, 0), fmt::format("ordering {} after that work", m_name));
    m_device->holdReleases(true);
    m_device->setStream(m_stream);
    m_begun = true;
    return {};
  }
  cudaStream_t stream() const { return m_stream; }
  void* pinned() const { return m_pinned; }
  void* pinnedOnDevice() const { return m_pinnedOnDevice; }

  // The graph: what body() queues on the stream, captured, then instantiated.
  template <class Body>
  Result<void> record(Body body) {
    OSPREY_CUDA_CHECK(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeRelaxed),
                      fmt::format("recording {}", m_name));
    OpenCapture capture{m_stream};
    OSPREY_CHECK(body());
    cudaGraph_t graph = nullptr;
    capture.open = false;
    OSPREY_CUDA_CHECK(cudaStreamEndCapture(m_stream, &graph), fmt::format("recording {}", m_name));
    m_graph = graph;
    OSPREY_CUDA_CHECK(cudaGraphInstantiate(&m_instance, m_graph, 0), fmt::format("instantiating {}", m_name));
    return {};
  }

  // The first result (queued on the stream before the first replay), once it is queued.
  Result<void> markFirst() {
    OSPREY_CUDA_CHECK(cudaEventRecord(m_first, m_stream), "marking the first result");
    return {};
  }
  Result<void> awaitFirst() {
    OSPREY_CUDA_CHECK(cudaEventSynchronize(m_first), "waiting for the first result");
    return {};
  }
  // Queues replay number `step` (0, 1, ...), at most one ahead of the one the host waits for.
  Result<void> queue(Index step) {
    OSPREY_CUDA_CHECK(cudaGraphLaunch(m_instance, m_stream), fmt::format("replaying {}", m_name));
    OSPREY_CUDA_CHECK(cudaEventRecord(m_done[step % 2], m_stream), "marking a replay's end");
    return {};
  }
  // Replay `step` has run; a CUDA error of its kernels surfaces here.
  Result<void> await(Index step) {
    OSPREY_CUDA_CHECK(cudaEventSynchronize(m_done[step % 2]), fmt::format("waiting for a replay of {}", m_name));
    return {};
  }

  // No more replays: waits for the last and destroys the graph. The rest (the stream, the held
  // releases, the events, the pinned memory) goes with the object, so that an owner may release
  // what the replays wrote while the releases are still held.
  void end() {
    if (m_ended) return;
    m_ended = true;
    if (m_stream) (void)cudaStreamSynchronize(m_stream);
    if (m_instance) (void)cudaGraphExecDestroy(m_instance);
    if (m_graph) (void)cudaGraphDestroy(m_graph);
  }

 private:
  std::shared_ptr<CudaDevice> m_device;
  const char* m_name;
  cudaStream_t m_stream = nullptr;
  cudaGraph_t m_graph = nullptr;
  cudaGraphExec_t m_instance = nullptr;
  cudaEvent_t m_done[2] = {nullptr, nullptr};
  cudaEvent_t m_first = nullptr;
  void* m_pinned = nullptr;
  void* m_pinnedOnDevice = nullptr;
  bool m_begun = false;  // the device's stream is ours and its releases are held
  bool m_ended = false;
};

}  // namespace osprey
