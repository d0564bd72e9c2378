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
#include "osprey/gpu/cuda/recorded_graph.hpp"

namespace gpt2::fast_parts {

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
// (osprey/gpu/cuda/recorded_graph.hpp; its pinned memory: the token chosen at each position) is
// declared last, so it ends (its last replay waited for, the device's stream and releases given
// back) before the rest is released.
template <class H>
struct RecordedStep {
  explicit RecordedStep(std::shared_ptr<osprey::CudaDevice> device) : graph(std::move(device), "the decoding graph") {}
  osprey::GpuBuffer<osprey::CudaDevice, int> position;
  Buf<H> token;
  fast_detail::CandidateRoom firstChoice, choice;  // the first token's argmax, and the lm head's (NextToken)
  DecodeRecording recording{};
  std::optional<StepOut<H>> recorded;
  osprey::RecordedGraph graph;
  int* tokensOnDevice() const { return static_cast<int*>(graph.pinnedOnDevice()); }
  // The token chosen after `position`, as the step there wrote it (once awaited).
  osprey::Result<int> tokenAt(osprey::Index position, osprey::Index V) const {
    const int id = static_cast<const volatile int*>(graph.pinned())[position];
    if (id < 0 || id >= V) return osprey::Error{"generate: the logits have no maximum (all NaN): the weights are broken"};
    return id;
  }
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
    osprey::RecordedGraph& graph = recorded->graph;
    const osprey::Index start = recorded->recording.start, V = w.config.V;
    const osprey::Index replays = count - 1;
    OSPREY_CHECK(graph.queue(0));
    OSPREY_CHECK(graph.awaitFirst());
    std::vector<int> out{OSPREY_TRY(recorded->tokenAt(start - 1, V))};
    OSPREY_CHECK(onToken(out.back()));
    for (osprey::Index i = 0; i < replays; ++i) {
      if (i + 1 < replays) OSPREY_CHECK(graph.queue(i + 1));  // the device goes on while the host streams
      // A replay's kernels record no faults (the strict checks live in the reference kernels, none
      // of which the recording holds); a CUDA error surfaces in the wait.
      OSPREY_CHECK(graph.await(i));
      out.push_back(OSPREY_TRY(recorded->tokenAt(start + i, V)));
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
  osprey::RecordedGraph& graph = step->graph;
  OSPREY_CHECK(graph.begin(static_cast<std::size_t>(c.maxT) * sizeof(int)));  // a token for each position

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
                                         step->tokensOnDevice()));
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
                                   step->tokensOnDevice(), r.embedding.data(), w.wte.data(), w.wpe.data(), Ci,
                                   static_cast<int>(c.V), static_cast<int>(c.maxT)};
  {
    Scoped recording(m_recording, &r);
    OSPREY_CHECK(graph.record([&]() -> osprey::Result<void> {
      step->recorded = OSPREY_TRY(decodeStep(h, w, views, step->token));
      // The step's lm head (normLogits) chose the token and wrote the next step's embedding; a
      // step that ended otherwise would replay on a stale embedding.
      if (!r.chose) return osprey::Error{"gpt2 decode: the recorded step did not end in the lm head"};
      return {};
    }));
  }
  return std::move(step);
}

}  // namespace gpt2::fast_parts
