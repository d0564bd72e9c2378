// The fast handler's decoding as a CUDA graph. Batch-1 decoding is about a hundred small kernels
// per token; launched one by one from the host they cost more than they compute. So the
// continuation records the model's own decodeStep (model.hpp) once, with stream capture, and
// replays that recording for every further token:
//
//   * the token and its position stay on the device: the step's encoder reads both from there,
//     its argmax writes the next token where the encoder will read it and moves the position on;
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
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/decode_graph.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

// A recorded decoding step and what it owns: its stream, graph and instance, the device-side
// token and position, the cache with room to grow, and the step's own outputs. While it lives the
// device's work goes to its stream and released blocks are held; both end with it, after its last
// replay has finished.
class FastHandler::DecodeGraph {
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
    OSPREY_CHECK(m_device->flush());  // everything queued on the legacy stream before, done
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
  // The token replay `step` chose, once it has run. Its kernels record no faults (the strict
  // checks live in the reference kernels, none of which the recording holds); a CUDA error
  // surfaces here.
  osprey::Result<int> await(osprey::Index step, osprey::Index V) {
    OSPREY_CUDA_CHECK(cudaEventSynchronize(m_done[step % 2]), "waiting for a replayed decoding step");
    const int id = static_cast<const volatile int*>(m_tokens)[recording.start + step];
    if (id < 0 || id >= V) return osprey::Error{"generate: the logits have no maximum (all NaN): the weights are broken"};
    return id;
  }

  // What the graph reads and writes, kept for as long as it may run.
  osprey::GpuBuffer<osprey::CudaDevice, int> position;
  Buffer token;
  Recording recording{};
  std::optional<StepOut<FastHandler>> recorded;
  ArgmaxScratch argmax;

 private:
  std::shared_ptr<osprey::CudaDevice> m_device;
  cudaStream_t m_stream = nullptr;
  cudaGraph_t m_graph = nullptr;
  cudaGraphExec_t m_instance = nullptr;
  cudaEvent_t m_done[2] = {nullptr, nullptr};
  int* m_tokens = nullptr;          // pinned and mapped: the token chosen at each position
  int* m_tokensOnDevice = nullptr;  // the same memory, as the device addresses it
  bool m_begun = false;  // the device's stream is ours and its releases are held
};

namespace fast_detail {
// Ends a stream capture that an error left open, so the stream is usable again.
struct OpenCapture {
  cudaStream_t stream;
  bool open = true;
  ~OpenCapture() {
    if (!open) return;
    cudaGraph_t abandoned = nullptr;
    (void)cudaStreamEndCapture(stream, &abandoned);
    if (abandoned) (void)cudaGraphDestroy(abandoned);
    (void)cudaGetLastError();
  }
};
// Sets a handler's recording for one scope.
template <class T>
struct Scoped {
  T*& slot;
  explicit Scoped(T*& s, T* value) : slot(s) { slot = value; }
  ~Scoped() { slot = nullptr; }
};
}  // namespace fast_detail

template <class Weights, class Cache>
osprey::Result<std::unique_ptr<FastHandler::DecodeGraph>> FastHandler::recordDecodeStep(const Weights& w,
                                                                                        const Cache& cache, int token) {
  static_assert(std::is_same_v<Weights, ForwardWeights<FastHandler>> && std::is_same_v<Cache, KvCache<FastHandler>>);
  const Config& c = w.config;
  const osprey::Index C = c.C, Tc = cache.length;
  if (Tc < 1 || Tc >= c.maxT)
    return osprey::Error{fmt::format("gpt2 decode: position {} is outside the context of {}", Tc, c.maxT)};
  if (cache.layers.size() != w.blocks.size())
    return osprey::Error{fmt::format("gpt2 decode: the cache has {} blocks, the model {}", cache.layers.size(),
                                     w.blocks.size())};
  auto graph = std::make_unique<DecodeGraph>(m_device);

  // The device-side state, on the legacy stream before recording starts.
  const int start = static_cast<int>(Tc);
  int* position = OSPREY_TRY(m_device->allocate<int>(1));
  graph->position = osprey::GpuBuffer<osprey::CudaDevice, int>(m_device, position, 1);
  OSPREY_CHECK(m_device->upload(position, &start, 1));
  const osprey::Scalar id[1] = {static_cast<osprey::Scalar>(token)};
  graph->token = OSPREY_TRY(fromList(std::span<const osprey::Scalar>(id)));
  graph->argmax = OSPREY_TRY(argmaxScratch());
  Recording& r = graph->recording;
  r.position = position;
  r.start = Tc;
  KvCache<FastHandler> views{{}, Tc};
  // Every block's keys and values with room for the context, in one allocation.
  const osprey::Index roomSize = OSPREY_TRY(checkedProduct("gpt2 decode", {c.maxT, C}));
  const auto rooms = OSPREY_TRY(allocate(OSPREY_TRY(
      checkedProduct("gpt2 decode", {2, static_cast<osprey::Index>(cache.layers.size()), roomSize}))));
  osprey::Index nextRoom = 0;
  for (const LayerCache<FastHandler>& held : cache.layers) {
    OSPREY_CHECK(fast_detail::checkShape(*this, held.keys, Tc, C, "gpt2 decode", "key cache"));
    OSPREY_CHECK(fast_detail::checkShape(*this, held.values, Tc, C, "gpt2 decode", "value cache"));
    for (auto [from, into] : {std::pair{&held.keys, &r.keys}, std::pair{&held.values, &r.values}}) {
      auto room = rooms.part(nextRoom++ * roomSize, roomSize);
      OSPREY_CUDA_CHECK(cudaMemcpyAsync(room.data(), from->data(), static_cast<std::size_t>(Tc * C) * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream()),
                        "copying the cache into room for the whole context");
      into->push_back(std::move(room));
    }
    views.layers.push_back(LayerCache<FastHandler>{r.keys.back().prefix(Tc * C), r.values.back().prefix(Tc * C)});
  }

  OSPREY_CHECK(graph->begin(c.maxT));
  {
    fast_detail::Scoped<Recording> recording(m_recording, &r);
    OSPREY_CUDA_CHECK(cudaStreamBeginCapture(graph->stream(), cudaStreamCaptureModeRelaxed),
                      "recording the decoding step");
    fast_detail::OpenCapture capture{graph->stream()};
    graph->recorded = OSPREY_TRY(decodeStep(*this, w, views, graph->token));
    OSPREY_CHECK(launchArgmax(graph->token.data(), graph->recorded->logits, graph->argmax, position,
                              graph->tokensOnDevice()));
    cudaGraph_t recorded = nullptr;
    capture.open = false;
    OSPREY_CUDA_CHECK(cudaStreamEndCapture(graph->stream(), &recorded), "recording the decoding step");
    OSPREY_CHECK(graph->instantiate(recorded));
  }
  return std::move(graph);
}

template <class Weights, class Step, class OnToken>
osprey::Result<std::vector<int>> FastHandler::continueGreedy(const Weights& w, Step& step, osprey::Index count,
                                                             OnToken& onToken) {
  static_assert(std::is_same_v<Weights, ForwardWeights<FastHandler>> && std::is_same_v<Step, StepOut<FastHandler>>);
  if (count < 2) return reference::continueGreedy(*this, w, step, count, onToken);
  std::unique_ptr<HalfWeights> half;  // outlives the graph that reads it
  if (m_decodeWeights == DecodeWeights::Bf16) half = OSPREY_TRY(halveWeights(w));
  if (!m_decodeGraphs) return reference::continueGreedy(*this, w, step, count, onToken);
  std::vector<int> out{static_cast<int>(OSPREY_TRY(greedyToken(step.logits)))};
  OSPREY_CHECK(onToken(out.back()));
  auto graph = OSPREY_TRY(recordDecodeStep(w, step.cache, out.back()));
  const osprey::Index replays = count - 1;
  OSPREY_CHECK(graph->queue(0));
  for (osprey::Index i = 0; i < replays; ++i) {
    if (i + 1 < replays) OSPREY_CHECK(graph->queue(i + 1));  // the device goes on while the host streams
    out.push_back(OSPREY_TRY(graph->await(i, w.config.V)));
    OSPREY_CHECK(onToken(out.back()));
  }
  return out;
}

inline osprey::Result<FastHandler::Buffer> FastHandler::encoderForward(const Buffer& tokens, const Buffer& wte,
                                                                       const Buffer& wpe, osprey::Index N,
                                                                       osprey::Index T, osprey::Index C,
                                                                       osprey::Index posOffset) {
  if (!m_recording) return reference::encoderForward(*this, tokens, wte, wpe, N, T, C, posOffset);
  const char* L = "encoder (recorded decoding step)";
  if (N != 1 || T != 1 || posOffset != m_recording->start)
    return osprey::Error{fmt::format("{}: expected one token at position {}, got {} at {}", L, m_recording->start, N,
                                     posOffset)};
  OSPREY_CHECK(fast_detail::checkShape(*this, tokens, 1, 1, L, "tokens"));
  const int Ci = OSPREY_TRY(fast_detail::intWidth(L, C));
  if (wte.size() % C != 0 || wpe.size() % C != 0)
    return osprey::Error{fmt::format("{}: wte ({}) and wpe ({}) must be whole rows of {} channels", L, wte.size(),
                                     wpe.size(), C)};
  const int V = OSPREY_TRY(fast_detail::intWidth(L, wte.size() / C));
  auto out = OSPREY_TRY(allocate(C));
  constexpr int threads = 256;
  OSPREY_CUDA_CHECK(fast_kernels::launchOverlapped(static_cast<unsigned>((Ci + threads - 1) / threads), threads, 0,
                                                   stream(), fast_kernels::embedOne, out.data(), tokens.data(), wte.data(),
                                                   wpe.data(), m_recording->position, Ci, V),
                    "fast one-token encoder launch");
  return out;
}

inline osprey::Result<AttendAppendingOut<FastHandler>> FastHandler::attendAppending(const Buffer& qkvRow,
                                                                                    const Buffer& keys,
                                                                                    const Buffer& values,
                                                                                    osprey::Index Tc, osprey::Index C,
                                                                                    osprey::Index NH) {
  if (!m_recording) return reference::attendAppending(*this, qkvRow, keys, values, Tc, C, NH);
  const char* L = "attention decode (recorded decoding step)";
  // The cache must be the recording's own, with room for the whole context.
  const Buffer* room[2] = {nullptr, nullptr};
  for (std::size_t l = 0; l < m_recording->keys.size(); ++l)
    if (m_recording->keys[l].data() == keys.data() && m_recording->values[l].data() == values.data())
      room[0] = &m_recording->keys[l], room[1] = &m_recording->values[l];
  if (!room[0] || Tc != m_recording->start)
    return osprey::Error{fmt::format("{}: the cache is not the recording's at position {}", L, m_recording->start)};
  auto out = OSPREY_TRY(attendRow(L, qkvRow, keys, values, Tc, C, NH, m_recording->position));
  return AttendAppendingOut<FastHandler>{std::move(out), room[0]->prefix((Tc + 1) * C), room[1]->prefix((Tc + 1) * C)};
}

}  // namespace gpt2
