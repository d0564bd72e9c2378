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
  osprey::Result<int> awaitFirst(osprey::Index V) {
    OSPREY_CUDA_CHECK(cudaEventSynchronize(m_first), "waiting for the first token");
    return tokenAt(recording.start - 1, V);
  }
  // The token replay `step` chose, once it has run. Its kernels record no faults (the strict
  // checks live in the reference kernels, none of which the recording holds); a CUDA error
  // surfaces here.
  osprey::Result<int> await(osprey::Index step, osprey::Index V) {
    OSPREY_CUDA_CHECK(cudaEventSynchronize(m_done[step % 2]), "waiting for a replayed decoding step");
    return tokenAt(recording.start + step, V);
  }

  // What the graph reads and writes, kept for as long as it may run.
  osprey::GpuBuffer<osprey::CudaDevice, int> position;
  Buffer token;
  CandidateRoom firstChoice, choice;  // the first token's argmax, and the lm head's (NextToken)
  Recording recording{};
  std::optional<StepOut<FastHandler>> recorded;

 private:
  std::shared_ptr<osprey::CudaDevice> m_device;
  cudaStream_t m_stream = nullptr;
  cudaGraph_t m_graph = nullptr;
  cudaGraphExec_t m_instance = nullptr;
  cudaEvent_t m_done[2] = {nullptr, nullptr};
  // The token chosen after `position`, as the step there wrote it.
  osprey::Result<int> tokenAt(osprey::Index position, osprey::Index V) const {
    const int id = static_cast<const volatile int*>(m_tokens)[position];
    if (id < 0 || id >= V) return osprey::Error{"generate: the logits have no maximum (all NaN): the weights are broken"};
    return id;
  }
  cudaEvent_t m_first = nullptr;
  int* m_tokens = nullptr;          // pinned and mapped: the token chosen at each position
  int* m_tokensOnDevice = nullptr;  // the same memory, as the device addresses it
  bool m_begun = false;  // the device's stream is ours and its releases are held
};

namespace fast_detail {
using OpenCapture = osprey::OpenCapture;
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
                                                                                        const Cache& cache,
                                                                                        const Buffer& logits) {
  static_assert(std::is_same_v<Weights, ForwardWeights<FastHandler>> && std::is_same_v<Cache, KvCache<FastHandler>>);
  const Config& c = w.config;
  const osprey::Index C = c.C, Tc = cache.length;
  if (Tc < 1 || Tc >= c.maxT)
    return osprey::Error{fmt::format("gpt2 decode: position {} is outside the context of {}", Tc, c.maxT)};
  if (cache.layers.size() != w.blocks.size())
    return osprey::Error{fmt::format("gpt2 decode: the cache has {} blocks, the model {}", cache.layers.size(),
                                     w.blocks.size())};
  OSPREY_CHECK(fast_detail::checkShape(*this, logits, 1, c.V, "gpt2 decode", "logits"));
  auto graph = std::make_unique<DecodeGraph>(m_device);
  OSPREY_CHECK(graph->begin(c.maxT));

  // The device-side state, on the graph's stream before recording starts: the first token, chosen
  // as the replays' lm head chooses (gridMaximum) from position start - 1, which it moves on, and
  // its embedding (later replays' comes from the step before: NextToken); the lm head's candidates
  // for the fused argmax.
  const int start = static_cast<int>(Tc), Ci = OSPREY_TRY(fast_detail::intWidth("gpt2 decode", C));
  int* position = OSPREY_TRY(m_device->allocate<int>(1));
  graph->position = osprey::GpuBuffer<osprey::CudaDevice, int>(m_device, position, 1);
  fast_kernels::storeInt<<<1, 1, 0, stream()>>>(position, start - 1);
  OSPREY_CHECK(fast_detail::launched("fast decoding position store"));
  graph->token = OSPREY_TRY(allocate(1));
  graph->firstChoice = OSPREY_TRY(candidateRoom(fast_kernels::kArgmaxBlocks));
  OSPREY_CHECK(launchArgmax(graph->token.data(), logits, graph->firstChoice, position, graph->tokensOnDevice()));
  Recording& r = graph->recording;
  r.position = position;
  r.start = Tc;
  r.embedding = OSPREY_TRY(allocate(C));
  OSPREY_CHECK(launchEmbedding(r.embedding, graph->token, w.wte, w.wpe, position, Ci));
  const int slots = fast_kernels::kMaxHeadBlocksPerMultiprocessor * m_device->multiprocessors();
  graph->choice = OSPREY_TRY(candidateRoom(slots));
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

  OSPREY_CHECK(graph->markFirst());
  r.next = fast_kernels::NextToken{fast_kernels::candidatesIn(graph->choice.data(), slots), position,
                                   graph->tokensOnDevice(), r.embedding.data(), w.wte.data(), w.wpe.data(), Ci,
                                   static_cast<int>(c.V), static_cast<int>(c.maxT)};
  {
    fast_detail::Scoped<Recording> recording(m_recording, &r);
    OSPREY_CUDA_CHECK(cudaStreamBeginCapture(graph->stream(), cudaStreamCaptureModeRelaxed),
                      "recording the decoding step");
    fast_detail::OpenCapture capture{graph->stream()};
    graph->recorded = OSPREY_TRY(decodeStep(*this, w, views, graph->token));
    // The step's lm head (normLogits) chose the token and wrote the next step's embedding; a step
    // that ended otherwise would replay on a stale embedding.
    if (!r.chose) return osprey::Error{"gpt2 decode: the recorded step did not end in the lm head"};
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
  // The host records the step while the device still runs the prompt's pass and chooses the first
  // token; the first replay is queued before the host waits for that token.
  auto graph = OSPREY_TRY(recordDecodeStep(w, step.cache, step.logits));
  const osprey::Index replays = count - 1;
  OSPREY_CHECK(graph->queue(0));
  std::vector<int> out{OSPREY_TRY(graph->awaitFirst(w.config.V))};
  OSPREY_CHECK(onToken(out.back()));
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
  if (C != m_recording->embedding.size() || wte.data() != m_recording->next.wte || wpe.data() != m_recording->next.wpe)
    return osprey::Error{fmt::format("{}: the embedding is not the recording's", L)};
  return m_recording->embedding;  // written before the first replay, and by each replay's lm head for the next
}

inline osprey::Result<void> FastHandler::launchEmbedding(const Buffer& out, const Buffer& token, const Buffer& wte,
                                                         const Buffer& wpe, const int* position, int C) {
  const char* L = "encoder (recorded decoding step)";
  if (wte.size() % C != 0 || wpe.size() % C != 0)
    return osprey::Error{fmt::format("{}: wte ({}) and wpe ({}) must be whole rows of {} channels", L, wte.size(),
                                     wpe.size(), C)};
  const int V = OSPREY_TRY(fast_detail::intWidth(L, wte.size() / C));
  constexpr int threads = 256;
  OSPREY_CUDA_CHECK(fast_kernels::launchOverlapped(static_cast<unsigned>((C + threads - 1) / threads), threads, 0,
                                                   stream(), fast_kernels::embedOne, out.data(), token.data(), wte.data(),
                                                   wpe.data(), position, C, V),
                    "fast one-token encoder launch");
  return {};
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
