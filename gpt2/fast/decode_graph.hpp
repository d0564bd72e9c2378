// The fast handler's decoding as a CUDA graph. Batch-1 decoding is about a hundred small kernels
// per token; launched one by one from the host they cost more than they compute. So the
// continuation records the model's own decodeStep (model.hpp) once, with stream capture, and
// replays that recording for every further token:
//
//   * the token and its position stay on the device: the step's lm head also chooses the next
//     token (fast_kernels::ArgmaxThen), moves the position on and writes the token's embedding,
//     which is the next replay's encoder output; the step is 61 kernels, the first a product;
//   * the host records while the device still runs the prompt's pass: the first token is chosen
//     on the device (argmaxKernel: the lm head's choice, gridMaximum), and read after the first
//     replay is queued;
//   * the cache has room for every position (maxT rows per block), and each block's attention
//     writes the new key and value into it before attending (attendAppending), so the step
//     allocates nothing that changes from one token to the next;
//   * blocks the recording used stay with it until it is gone (CudaDevice::holdReleases);
//   * the next replay is queued before the host waits for the current one's token, so the device
//     never waits for the host: each step's argmax writes its token straight into pinned host
//     memory, one slot per position.
//
// The replayed kernels are the recorded ones, with the same arguments: only the device-side token
// and position differ. tests/cuda/fast_test.cu checks that the replayed continuation equals the
// step-by-step one (setDecodeGraphs(false)) token for token.
//
// DecodeRecorder is the handler's part that does this; while it records, the handler's layers
// that read the device-side position answer for its DecodeRecording (the encoder, attention over
// the cache, the lm head: fast/decode_layers.hpp). nvcc units only.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpt2/fast/decode_kernels.hpp"
#include "gpt2/fast/launch_checks.hpp"
#include "gpt2/fast/token_choice.hpp"
#include "gpt2/model/generate.hpp"
#include "osprey/gpu/cuda/fast.hpp"
#include "osprey/gpu/cuda/open_capture.hpp"

namespace gpt2::fast_parts {

// A recorded decoding step's stream, graph and instance, and the pinned memory its tokens are
// read back through. While it lives the device's work goes to its stream and released blocks are
// held; both end with it, after its last replay has finished.
class DecodeGraph {
 public:
  explicit DecodeGraph(std::shared_ptr<osprey::CudaDevice> device) : m_device(std::move(device)) {}
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;
  ~DecodeGraph() {
    // Best effort, as any release: a CUDA error here has already been reported by a replay's wait.
    if (m_stream) (void)cudaStreamSynchronize(m_stream);
    if (m_instance) (void)cudaGraphExecDestroy(m_instance);
    if (m_graph) (void)cudaGraphDestroy(m_graph);
    if (m_begun) {
      m_device->setStream(nullptr);
      m_device->holdReleases(false);
    }
    for (cudaEvent_t e : m_done)
      if (e) (void)cudaEventDestroy(e);
    if (m_first) (void)cudaEventDestroy(m_first);
    if (m_stream) (void)cudaStreamDestroy(m_stream);
    if (m_tokens) (void)cudaFreeHost(m_tokens);
  }

  // The stream to record on (the legacy default stream cannot be captured), made the device's.
  // `positions`: the context's length, one slot each for the tokens the steps write to the host.
  osprey::Result<void> begin(osprey::Index positions) {
    OSPREY_CUDA_CHECK(cudaStreamCreate(&m_stream), "creating the decoding graph's stream");
    for (cudaEvent_t& e : m_done)
      OSPREY_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating the decoding graph's events");
    void* pinned = nullptr;
    OSPREY_CUDA_CHECK(cudaHostAlloc(&pinned, static_cast<std::size_t>(positions) * sizeof(int), cudaHostAllocMapped),
                      "allocating the decoding graph's token read-back");
    m_tokens = static_cast<int*>(pinned);
    void* onDevice = nullptr;
    OSPREY_CUDA_CHECK(cudaHostGetDevicePointer(&onDevice, pinned, 0), "mapping the token read-back");
    m_tokensOnDevice = static_cast<int*>(onDevice);
    OSPREY_CUDA_CHECK(cudaEventCreateWithFlags(&m_first, cudaEventDisableTiming), "creating the decoding graph's events");
    // No wait for the device: the stream's work (the first token, the cache's copies, every
    // replay) waits on the device for what the device's stream holds (the prompt's pass), and the
    // host records the step meanwhile.
    OSPREY_CUDA_CHECK(cudaEventRecord(m_first, m_device->stream()), "marking the prompt's pass");
    OSPREY_CUDA_CHECK(cudaStreamWaitEvent(m_stream, m_first, 0), "ordering the decoding graph after the prompt");
    m_device->holdReleases(true);
    m_device->setStream(m_stream);
    m_begun = true;
    return {};
  }
  cudaStream_t stream() const { return m_stream; }
  int* tokensOnDevice() const { return m_tokensOnDevice; }

  // The captured graph, instantiated.
  osprey::Result<void> instantiate(cudaGraph_t graph) {
    m_graph = graph;
    OSPREY_CUDA_CHECK(cudaGraphInstantiate(&m_instance, m_graph, 0), "instantiating the decoding graph");
    return {};
  }

  // Queues replay number `step` (0, 1, ...): the step at position start + step. Steps are queued
  // at most one ahead of the one the host waits for (two events, used in turn).
  osprey::Result<void> queue(osprey::Index step) {
    OSPREY_CUDA_CHECK(cudaGraphLaunch(m_instance, m_stream), "replaying the decoding graph");
    OSPREY_CUDA_CHECK(cudaEventRecord(m_done[step % 2], m_stream), "marking a replay's end");
    return {};
  }
  // The first token (chosen from the prompt's logits before the first replay), once it is.
  osprey::Result<void> markFirst() {
    OSPREY_CUDA_CHECK(cudaEventRecord(m_first, m_stream), "marking the first token");
    return {};
  }
  osprey::Result<void> awaitFirst() {
    OSPREY_CUDA_CHECK(cudaEventSynchronize(m_first), "waiting for the first token");
    return {};
  }
  // Replay `step` has run. Its kernels record no faults (the strict checks live in the reference
  // kernels, none of which the recording holds); a CUDA error surfaces here.
  osprey::Result<void> await(osprey::Index step) {
    OSPREY_CUDA_CHECK(cudaEventSynchronize(m_done[step % 2]), "waiting for a replayed decoding step");
    return {};
  }
  // The token chosen after `position`, as the step there wrote it (once awaited).
  osprey::Result<int> tokenAt(osprey::Index position, osprey::Index V) const {
    const int id = static_cast<const volatile int*>(m_tokens)[position];
    if (id < 0 || id >= V) return osprey::Error{"generate: the logits have no maximum (all NaN): the weights are broken"};
    return id;
  }

 private:
  std::shared_ptr<osprey::CudaDevice> m_device;
  cudaStream_t m_stream = nullptr;
  cudaGraph_t m_graph = nullptr;
  cudaGraphExec_t m_instance = nullptr;
  cudaEvent_t m_done[2] = {nullptr, nullptr};
  cudaEvent_t m_first = nullptr;
  int* m_tokens = nullptr;          // pinned and mapped: the token chosen at each position
  int* m_tokensOnDevice = nullptr;  // the same memory, as the device addresses it
  bool m_begun = false;  // the device's stream is ours and its releases are held
};

// What the recorded step's layers read while it records: where its position lives on the device,
// the position it had when recording began, and each block's keys and values with room for maxT
// positions. The step's lm head also chooses the token and writes the next step's embedding
// (`next`, fast_kernels::ArgmaxThen; `chose` once it has), and its encoder is that embedding.
struct DecodeRecording {
  using Buffer = osprey::Fast::Buffer;
  int* position;
  osprey::Index start;
  std::vector<Buffer> keys, values;
  Buffer embedding;
  fast_kernels::NextToken next{};
  bool chose = false;
};

// A recorded step and what its graph reads and writes, kept for as long as it may run. The graph
// is declared last, so it ends (its last replay waited for, the device's stream and releases
// given back) before the rest is released.
template <class H>
struct RecordedStep {
  explicit RecordedStep(std::shared_ptr<osprey::CudaDevice> device) : graph(std::move(device)) {}
  osprey::GpuBuffer<osprey::CudaDevice, int> position;
  Buf<H> token;
  fast_detail::CandidateRoom firstChoice, choice;  // the first token's argmax, and the lm head's (NextToken)
  DecodeRecording recording{};
  std::optional<StepOut<H>> recorded;
  DecodeGraph graph;
};

// The handler's CUDA-graph decoding: on or off, the step it is recording (which the handler's
// layers answer for), and the continuation that records one step and replays it.
class DecodeRecorder {
 public:
  void setOn(bool on) { m_on = on; }
  bool on() const { return m_on; }
  // The step being recorded, else null.
  DecodeRecording* recording() const { return m_recording; }

  // count tokens after step (count >= 2) on h, this recorder's handler: the host records the step
  // while the device still runs the prompt's pass and chooses the first token; the first replay
  // is queued before the host waits for that token.
  template <class H, class Weights, class Step, class OnToken>
  osprey::Result<std::vector<int>> continueGreedy(H& h, const Weights& w, Step& step, osprey::Index count,
                                                  OnToken& onToken) {
    auto recorded = OSPREY_TRY(record(h, w, step.cache, step.logits));
    DecodeGraph& graph = recorded->graph;
    const osprey::Index start = recorded->recording.start, V = w.config.V;
    const osprey::Index replays = count - 1;
    OSPREY_CHECK(graph.queue(0));
    OSPREY_CHECK(graph.awaitFirst());
    std::vector<int> out{OSPREY_TRY(graph.tokenAt(start - 1, V))};
    OSPREY_CHECK(onToken(out.back()));
    for (osprey::Index i = 0; i < replays; ++i) {
      if (i + 1 < replays) OSPREY_CHECK(graph.queue(i + 1));  // the device goes on while the host streams
      OSPREY_CHECK(graph.await(i));
      out.push_back(OSPREY_TRY(graph.tokenAt(start + i, V)));
      OSPREY_CHECK(onToken(out.back()));
    }
    return out;
  }

 private:
  template <class H, class Weights, class Cache>
  osprey::Result<std::unique_ptr<RecordedStep<H>>> record(H& h, const Weights& w, const Cache& cache,
                                                          const Buf<H>& logits);
  // Sets the recording for one scope.
  struct Scoped {
    DecodeRecording*& slot;
    explicit Scoped(DecodeRecording*& s, DecodeRecording* value) : slot(s) { slot = value; }
    ~Scoped() { slot = nullptr; }
  };
  DecodeRecording* m_recording = nullptr;
  bool m_on = true;
};

template <class H, class Weights, class Cache>
osprey::Result<std::unique_ptr<RecordedStep<H>>> DecodeRecorder::record(H& h, const Weights& w, const Cache& cache,
                                                                         const Buf<H>& logits) {
  const Config& c = w.config;
  const osprey::Index C = c.C, Tc = cache.length;
  if (Tc < 1 || Tc >= c.maxT)
    return osprey::Error{fmt::format("gpt2 decode: position {} is outside the context of {}", Tc, c.maxT)};
  if (cache.layers.size() != w.blocks.size())
    return osprey::Error{fmt::format("gpt2 decode: the cache has {} blocks, the model {}", cache.layers.size(),
                                     w.blocks.size())};
  OSPREY_CHECK(fast_detail::checkShape(h, logits, 1, c.V, "gpt2 decode", "logits"));
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  auto step = std::make_unique<RecordedStep<H>>(device);
  DecodeGraph& graph = step->graph;
  OSPREY_CHECK(graph.begin(c.maxT));

  // The device-side state, on the graph's stream before recording starts: the first token, chosen
  // as the replays' lm head chooses (gridMaximum) from position start - 1, which it moves on, and
  // its embedding (later replays' comes from the step before: NextToken); the lm head's candidates
  // for the fused argmax.
  const int start = static_cast<int>(Tc), Ci = OSPREY_TRY(fast_detail::intWidth("gpt2 decode", C));
  int* position = OSPREY_TRY(device->allocate<int>(1));
  step->position = osprey::GpuBuffer<osprey::CudaDevice, int>(device, position, 1);
  fast_kernels::storeInt<<<1, 1, 0, h.stream()>>>(position, start - 1);
  OSPREY_CHECK(fast_detail::launched("fast decoding position store"));
  step->token = OSPREY_TRY(h.allocate(1));
  step->firstChoice = OSPREY_TRY(fast_detail::candidateRoom(device, fast_kernels::kArgmaxBlocks));
  OSPREY_CHECK(fast_detail::launchArgmax(h.stream(), step->token.data(), logits, step->firstChoice, position,
                                         graph.tokensOnDevice()));
  DecodeRecording& r = step->recording;
  r.position = position;
  r.start = Tc;
  r.embedding = OSPREY_TRY(h.allocate(C));
  OSPREY_CHECK(fast_detail::launchEmbedding(h.stream(), r.embedding, step->token, w.wte, w.wpe, position, Ci));
  const int slots = fast_kernels::kMaxHeadBlocksPerMultiprocessor * device->multiprocessors();
  step->choice = OSPREY_TRY(fast_detail::candidateRoom(device, slots));
  KvCache<H> views{{}, Tc};
  // Every block's keys and values with room for the context, in one allocation.
  const osprey::Index roomSize = OSPREY_TRY(checkedProduct("gpt2 decode", {c.maxT, C}));
  const auto rooms = OSPREY_TRY(h.allocate(OSPREY_TRY(
      checkedProduct("gpt2 decode", {2, static_cast<osprey::Index>(cache.layers.size()), roomSize}))));
  osprey::Index nextRoom = 0;
  for (const LayerCache<H>& held : cache.layers) {
    OSPREY_CHECK(fast_detail::checkShape(h, held.keys, Tc, C, "gpt2 decode", "key cache"));
    OSPREY_CHECK(fast_detail::checkShape(h, held.values, Tc, C, "gpt2 decode", "value cache"));
    for (auto [from, into] : {std::pair{&held.keys, &r.keys}, std::pair{&held.values, &r.values}}) {
      auto room = rooms.part(nextRoom++ * roomSize, roomSize);
      OSPREY_CUDA_CHECK(cudaMemcpyAsync(room.data(), from->data(), static_cast<std::size_t>(Tc * C) * sizeof(float),
                                        cudaMemcpyDeviceToDevice, h.stream()),
                        "copying the cache into room for the whole context");
      into->push_back(std::move(room));
    }
    views.layers.push_back(LayerCache<H>{r.keys.back().prefix(Tc * C), r.values.back().prefix(Tc * C)});
  }

  OSPREY_CHECK(graph.markFirst());
  r.next = fast_kernels::NextToken{fast_kernels::candidatesIn(step->choice.data(), slots), position,
                                   graph.tokensOnDevice(), r.embedding.data(), w.wte.data(), w.wpe.data(), Ci,
                                   static_cast<int>(c.V), static_cast<int>(c.maxT)};
  {
    Scoped recording(m_recording, &r);
    OSPREY_CUDA_CHECK(cudaStreamBeginCapture(graph.stream(), cudaStreamCaptureModeRelaxed),
                      "recording the decoding step");
    osprey::OpenCapture capture{graph.stream()};
    step->recorded = OSPREY_TRY(decodeStep(h, w, views, step->token));
    // The step's lm head (normLogits) chose the token and wrote the next step's embedding; a step
    // that ended otherwise would replay on a stale embedding.
    if (!r.chose) return osprey::Error{"gpt2 decode: the recorded step did not end in the lm head"};
    cudaGraph_t recorded = nullptr;
    capture.open = false;
    OSPREY_CUDA_CHECK(cudaStreamEndCapture(graph.stream(), &recorded), "recording the decoding step");
    OSPREY_CHECK(graph.instantiate(recorded));
  }
  return std::move(step);
}

}  // namespace gpt2::fast_parts
