// The exact gpu handler on the cuda device, decoding from a recorded step. Batch-1 decoding is a
// few hundred small kernels a token; launched one by one from the host, with the host choosing each
// token, the device waits between them. So the greedy continuation records the model's own
// decodeStep (gpt2/model/model.hpp) once, with stream capture, and replays that recording for every
// further token, as the fast handler does (gpt2/fast/decode_graph.hpp):
//
//   * the position lives on the device; the only layers that read it are the encoder (whose output
//     for the recorded step is the embedding the previous step wrote) and the attention over the
//     cache, which runs the reference's row folds (dotRows, softmaxStats) with row lengths read
//     from the device position, in one launch (attend_row.hpp): the same terms, combined in the
//     same order, so the same doubles;
//   * the cache has room for the whole context, the new key and value written at the position;
//   * after ln_f, the lm head's products are made only where they can decide greedyToken's choice
//     (bounded_choice.hpp: bounds from a half copy of wte first, then the exact chains of the rows
//     the bounds leave), and one kernel makes the choice, moves the position on and writes the
//     chosen token's embedding and the token itself to pinned memory (where the width does not fit
//     that, the whole lm head and recorded_kernels.hpp's choice from every logit);
//   * the next replay is queued before the host waits for the current token, so the device never
//     waits for the host.
//
// Everything else in the step is the reference's kernels with their shapes of one position (the
// LayerNorm in front of the qkv and fc layers inside their products' kernel: norm_linear_row.hpp),
// the blocks they used held for the recording's lifetime (CudaDevice::holdReleases). The replayed
// continuation equals the step-by-step one token for token (tests/cuda/recorded_decoding_test.cu),
// and the CLI's `generate` on gpu/cuda equals gpu/host's (gpu-check's digests).
#pragma once

#if !defined(__CUDACC__)
#error "gpt2/cuda/recorded_cuda.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpt2/cuda/attend_row.hpp"
#include "gpt2/cuda/bounded_choice.hpp"
#include "gpt2/cuda/layernorm_rows.hpp"
#include "gpt2/cuda/linear_row.hpp"
#include "gpt2/cuda/norm_linear_row.hpp"
#include "gpt2/cuda/recorded_kernels.hpp"
#include "gpt2/model/generate.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/handler.hpp"
#include "osprey/gpu/cuda/kernels/block_trace.hpp"
#include "osprey/gpu/cuda/recorded_graph.hpp"

namespace gpt2 {

class RecordedCuda : public osprey::GpuCuda {
 public:
  explicit RecordedCuda(std::shared_ptr<osprey::CudaDevice> device) : osprey::GpuCuda(std::move(device)) {}

  // Derived operations: the recording's own while a step is being recorded, the reference otherwise.
  osprey::Result<Buffer> encoderForward(const Buffer& tokens, const Buffer& wte, const Buffer& wpe, osprey::Index N,
                                        osprey::Index T, osprey::Index C, osprey::Index posOffset);
  osprey::Result<AttendAppendingOut<RecordedCuda>> attendAppending(const Buffer& qkvRow, const Buffer& keys,
                                                                   const Buffer& values, osprey::Index Tc,
                                                                   osprey::Index C, osprey::Index NH);
  // The reference LayerNorm's folds and build as one launch (gpt2/cuda/layernorm_rows.hpp, or for
  // one row norm_linear_row.hpp's, its chains on the tensor cores: the same operations in the same
  // order); rows too long for its shared memory take the reference.
  osprey::Result<LayerNormOut<RecordedCuda>> layernormForward(const Buffer& x, const Buffer& w, const Buffer& b,
                                                              osprey::Index N, osprey::Index C) {
    if (N == 1 && norm_linear_row::fits(C)) return norm_linear_row::layernormOneRow(*this, x, w, b, C);
    return layernorm_rows::layernormOneLaunch(*this, x, w, b, N, C);
  }
  // A decoded row's LayerNorm and the linear layer after it (and its GELU) in one launch
  // (gpt2/cuda/norm_linear_row.hpp: the same operations in the same order); several rows, and rows
  // too wide for its shared memory, take the reference's layers one by one.
  osprey::Result<Buffer> normLinear(const Buffer& x, const Buffer& lnWeight, const Buffer& lnBias, const Buffer& wT,
                                    const Buffer& bias, osprey::Index N, osprey::Index IC, osprey::Index OC) {
    if (N == 1 && norm_linear_row::fits(IC))
      return norm_linear_row::normLinearOneRow(*this, x, lnWeight, lnBias, wT, bias, IC, OC, norm_linear_row::AsBiased{});
    return reference::normLinear(*this, x, lnWeight, lnBias, wT, bias, N, IC, OC);
  }
  osprey::Result<Buffer> normLinearGelu(const Buffer& x, const Buffer& lnWeight, const Buffer& lnBias,
                                        const Buffer& wT, const Buffer& bias, osprey::Index N, osprey::Index IC,
                                        osprey::Index OC) {
    if (N == 1 && norm_linear_row::fits(IC))
      return norm_linear_row::normLinearOneRow(*this, x, lnWeight, lnBias, wT, bias, IC, OC, norm_linear_row::Gelu{});
    return reference::normLinearGelu(*this, x, lnWeight, lnBias, wT, bias, N, IC, OC);
  }
  // A decoded row's linear layer and the residual after it in the product's kernel (gpt2/cuda/
  // linear_row.hpp: the same operations in the same order); several rows take the reference's.
  osprey::Result<Buffer> linearResidual(const Buffer& x, const Buffer& in, const Buffer& wT, const Buffer& bias,
                                        osprey::Index N, osprey::Index IC, osprey::Index OC) {
    if (N == 1) return linear_row::linearResidualOneRow(*this, x, in, wT, bias, IC, OC);
    return reference::linearResidual(*this, x, in, wT, bias, N, IC, OC);
  }
  // The greedy continuation from a recorded step (or step by step: setRecordedDecoding(false), when
  // the device times or checks each launch, or for fewer than two tokens).
  template <class Weights, class Step, class OnToken>
  osprey::Result<std::vector<int>> continueGreedy(const Weights& w, Step& step, osprey::Index count, OnToken& onToken);

  void setRecordedDecoding(bool on) { m_recordedDecoding = on; }

 private:
  class Recording;
  Recording* m_recording = nullptr;  // while a step is being recorded
  bool m_recordedDecoding = true;
};

// The recording and what it owns: its stream, graph and instance, the device-side position, the
// cache with room for the context, the embedding each step reads, and the recorded step's outputs.
// While it lives the device's work goes to its stream and released blocks are held; both end with
// it, after its last replay has finished.
class RecordedCuda::Recording {
 public:
  explicit Recording(std::shared_ptr<osprey::CudaDevice> device)
      : m_graph(std::move(device), "the decoding recording") {}
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  ~Recording() {
    // The last replay waited for and the graph gone, the step's outputs are released while the
    // device still holds releases; then m_graph (declared last, so destroyed first) gives the
    // stream and the held releases back, before the other members are released.
    m_graph.end();
    recorded.reset();
    logits.reset();
  }

  // A stream of its own, ordered after what the device's stream holds (the prompt's pass), made
  // the device's (osprey/gpu/cuda/recorded_graph.hpp); pinned slots for each position's token.
  osprey::Result<void> begin(osprey::Index positions) {
    const std::size_t n = static_cast<std::size_t>(positions);
    OSPREY_CHECK(m_graph.begin(n * (sizeof(double) + sizeof(int))));
    m_bests = static_cast<double*>(m_graph.pinned());
    m_tokens = reinterpret_cast<int*>(m_bests + n);
    m_bestsOnDevice = static_cast<double*>(m_graph.pinnedOnDevice());
    m_tokensOnDevice = reinterpret_cast<int*>(m_bestsOnDevice + n);
    return {};
  }

  cudaStream_t stream() const { return m_graph.stream(); }

  // The choice after the logits of position *position - 1 ... : chooseThenEmbed on `logits` (V).
  osprey::Result<void> launchChoice(const Buffer& logits) {
    using namespace recorded_kernels;
    chooseThenEmbed<<<1, kChooseThreads, 0, stream()>>>(logits.data(), logits.size(), position(), m_tokensOnDevice,
                                                        m_bestsOnDevice, embedding.data(), wte, wpe, C, maxT);
    OSPREY_CUDA_CHECK(cudaGetLastError(), "recorded decoding: the greedy choice's launch");
    return {};
  }

  // The same choice from the hidden row (C) the lm head reads (bounded_choice.hpp), where `bounded`
  // holds the choice's buffers; otherwise from the lm head's logits.
  template <class Weights>
  osprey::Result<void> launchChoiceFromHidden(RecordedCuda& h, const Weights& w, const Buffer& hidden) {
    if (bounded)
      return bounded->launch(hidden.data(), stream(), position(), m_tokensOnDevice, m_bestsOnDevice, embedding.data(),
                             wpe, maxT);
    logits = OSPREY_TRY(lmHead(h, w, hidden, 1));
    return launchChoice(*logits);
  }

  template <class Body>
  osprey::Result<void> record(Body body) {
    return m_graph.record(body);
  }
  osprey::Result<void> markFirst() { return m_graph.markFirst(); }
  // Replay number `step`; at most one ahead of the one the host waits for.
  osprey::Result<void> queue(osprey::Index step) { return m_graph.queue(step); }
  osprey::Result<int> awaitFirst() {
    OSPREY_CHECK(m_graph.awaitFirst());
    return tokenAt(start);
  }
  osprey::Result<int> await(osprey::Index step) {
    OSPREY_CHECK(m_graph.await(step));
    return tokenAt(start + 1 + step);
  }

  // What the recording reads and writes, kept for as long as it may run.
  osprey::GpuBuffer<osprey::CudaDevice, int> positionBuffer;  // the position of the token being decoded
  int* position() const { return positionBuffer.data(); }
  osprey::Index start = 0;  // the first new token's position: the prompt's length
  Buffer embedding;         // (C): the encoder's output for the recorded step
  std::vector<Buffer> keys, values;  // per block, (maxT, C) each
  const double* wte = nullptr;
  const double* wpe = nullptr;
  osprey::Index C = 0, maxT = 0;
  std::optional<HiddenStepOut<RecordedCuda>> recorded;
  std::optional<Buffer> logits;                         // the recorded lm head's, where not bounded
  std::optional<bounded_choice::Choice> bounded;        // where the model's width fits it

 private:
  // The token chosen for `at`, as the kernel wrote it; no token is greedyToken's error.
  osprey::Result<int> tokenAt(osprey::Index at) const {
    const int id = static_cast<const volatile int*>(m_tokens)[at];
    if (id < 0) {
      const double best = static_cast<const volatile double*>(m_bests)[at];
      return osprey::Error{fmt::format("generate: the largest logit is {}: the model's activations are not finite (the "
                                       "weights are broken or too large)",
                                       best)};
    }
    return id;
  }

  double* m_bests = nullptr;  // pinned and mapped: the largest logit before each position
  int* m_tokens = nullptr;    // the token chosen at each position
  double* m_bestsOnDevice = nullptr;
  int* m_tokensOnDevice = nullptr;
  osprey::RecordedGraph m_graph;  // last: see ~Recording
};

namespace recorded_detail {
// Every row as long as the positions up to and including the device-side one.
struct UpToPosition {
  const int* position;
  OSPREY_FN osprey::Index operator()(osprey::Index) const { return static_cast<osprey::Index>(*position) + 1; }
};
// The score rows (NH, maxT) of the positions up to the device-side one: hs terms each, none beyond.
struct ScoreRowsUpToPosition {
  const int* position;
  osprey::Index maxT, hs;
  OSPREY_FN osprey::Index operator()(osprey::Index i) const { return i % maxT <= *position ? hs : 0; }
};
}  // namespace recorded_detail

inline osprey::Result<RecordedCuda::Buffer> RecordedCuda::encoderForward(const Buffer& tokens, const Buffer& wte,
                                                                         const Buffer& wpe, osprey::Index N,
                                                                         osprey::Index T, osprey::Index C,
                                                                         osprey::Index posOffset) {
  if (!m_recording) return reference::encoderForward(*this, tokens, wte, wpe, N, T, C, posOffset);
  if (N != 1 || T != 1 || posOffset != m_recording->start || C != m_recording->C || wte.data() != m_recording->wte ||
      wpe.data() != m_recording->wpe)
    return osprey::Error{fmt::format("encoder (recorded decoding step): expected one token at position {} of the "
                                     "recording's model, got {} at {}",
                                     m_recording->start, N, posOffset)};
  return m_recording->embedding;  // written before the first replay, and by each replay for the next
}

// The reference attentionDecode's folds (detail::attendCached) over the room's positions 0 ..
// *position (the new one included), after the new key and value are written at *position: rows
// and strides of the whole context, row lengths from the device. All of it in one launch
// (gpt2/cuda/attend_row.hpp: the same terms, combined in the same order) where the context and
// the head size fit that kernel; otherwise the append and the four folds one by one.
inline osprey::Result<AttendAppendingOut<RecordedCuda>> RecordedCuda::attendAppending(const Buffer& qkvRow,
                                                                                      const Buffer& keys,
                                                                                      const Buffer& values,
                                                                                      osprey::Index Tc, osprey::Index C,
                                                                                      osprey::Index NH) {
  if (!m_recording) return reference::attendAppending(*this, qkvRow, keys, values, Tc, C, NH);
  const char* L = "attention decode (recorded decoding step)";
  Recording& r = *m_recording;
  std::optional<std::size_t> block;
  for (std::size_t l = 0; l < r.keys.size(); ++l)
    if (r.keys[l].data() == keys.data() && r.values[l].data() == values.data()) block = l;
  if (!block || Tc != r.start || C != r.C)
    return osprey::Error{fmt::format("{}: the cache is not the recording's at position {}", L, r.start)};
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  OSPREY_CHECK(checkLength(*this, qkvRow, 3 * C, L, "qkv row"));
  const Buffer& keyRoom = r.keys[*block];
  const Buffer& valueRoom = r.values[*block];
  if (attend_row::fits(r.maxT, hs)) {  // the append and the four folds in one launch
    auto out = OSPREY_TRY(attend_row::attendAppendingOneRow(*this, qkvRow, keyRoom, valueRoom, r.position(), r.maxT, C, NH));
    return AttendAppendingOut<RecordedCuda>{std::move(out), keyRoom.prefix((Tc + 1) * C), valueRoom.prefix((Tc + 1) * C)};
  }
  recorded_kernels::appendAtPosition<<<static_cast<unsigned>((C + 255) / 256), 256, 0, r.stream()>>>(
      keyRoom.data(), valueRoom.data(), qkvRow.data(), r.position(), C);
  OSPREY_CUDA_CHECK(cudaGetLastError(), fmt::format("{}: the append's launch", L));

  auto out = OSPREY_TRY(detail::attendCached(*this, qkvRow, keyRoom, valueRoom, NH * r.maxT, r.maxT, C, NH, hs,
                                             recorded_detail::ScoreRowsUpToPosition{r.position(), r.maxT, hs},
                                             recorded_detail::UpToPosition{r.position()}));
  return AttendAppendingOut<RecordedCuda>{std::move(out), keyRoom.prefix((Tc + 1) * C), valueRoom.prefix((Tc + 1) * C)};
}

template <class Weights, class Step, class OnToken>
osprey::Result<std::vector<int>> RecordedCuda::continueGreedy(const Weights& w, Step& step, osprey::Index count,
                                                             OnToken& onToken) {
  static_assert(std::is_same_v<Weights, ForwardWeights<RecordedCuda>> && std::is_same_v<Step, StepOut<RecordedCuda>>);
  const std::shared_ptr<osprey::CudaDevice>& device = runtime();
  // Stepping, where a recording cannot stand in: the kernel clock times each launch with events
  // and the checked mode waits for each, neither of which a replay repeats.
  if (count < 2 || !m_recordedDecoding || device->checksEachLaunch() || device->timesKernels())
    return reference::continueGreedy(*this, w, step, count, onToken);
  const Config& c = w.config;
  const osprey::Index C = c.C, Tc = step.cache.length;
  if (Tc < 1 || Tc >= c.maxT)
    return osprey::Error{fmt::format("gpt2 decode: position {} is outside the context of {}", Tc, c.maxT)};
  if (step.cache.layers.size() != w.blocks.size())
    return osprey::Error{fmt::format("gpt2 decode: the cache has {} blocks, the model {}", step.cache.layers.size(),
                                     w.blocks.size())};
  OSPREY_CHECK(checkLength(*this, step.logits, c.V, "gpt2 decode", "logits"));

  osprey::cuda_detail::traceStart();
  Recording r(device);
  OSPREY_CHECK(r.begin(c.maxT));
  r.start = Tc;
  r.C = C;
  r.maxT = c.maxT;
  r.wte = w.wte.data();
  r.wpe = w.wpe.data();
  r.positionBuffer = osprey::GpuBuffer<osprey::CudaDevice, int>(device, OSPREY_TRY(device->template allocate<int>(1)), 1);
  recorded_kernels::storePosition<<<1, 1, 0, r.stream()>>>(r.position(), static_cast<int>(Tc - 1));
  OSPREY_CUDA_CHECK(cudaGetLastError(), "recorded decoding: the position's store");
  r.embedding = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, C));
  // Each block's keys and values with room for the context, the prompt's positions copied in.
  const osprey::Index room = OSPREY_TRY(checkedProduct("gpt2 decode", {c.maxT, C}));
  KvCache<RecordedCuda> views{{}, Tc};
  for (const LayerCache<RecordedCuda>& held : step.cache.layers) {
    OSPREY_CHECK(checkLength(*this, held.keys, Tc * C, "gpt2 decode", "key cache"));
    OSPREY_CHECK(checkLength(*this, held.values, Tc * C, "gpt2 decode", "value cache"));
    for (auto [from, into] : {std::pair{&held.keys, &r.keys}, std::pair{&held.values, &r.values}}) {
      Buffer grown = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, room));
      OSPREY_CUDA_CHECK(cudaMemcpyAsync(grown.data(), from->data(), static_cast<std::size_t>(Tc * C) * sizeof(double),
                                        cudaMemcpyDeviceToDevice, r.stream()),
                        "copying the cache into room for the whole context");
      into->push_back(std::move(grown));
    }
    views.layers.push_back(LayerCache<RecordedCuda>{r.keys.back().prefix(Tc * C), r.values.back().prefix(Tc * C)});
  }
  if (bounded_choice::fits(c.V, C))
    r.bounded = OSPREY_TRY(bounded_choice::Choice::make(device, r.wte, c.V, C, r.stream()));
  // The first token: the prompt's logits chosen as every replay chooses.
  OSPREY_CHECK(r.launchChoice(step.logits));
  OSPREY_CHECK(r.markFirst());
  const Buffer token = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(device, 1));  // never read: the encoder answers with the embedding
  {
    struct Scoped {
      Recording*& slot;
      ~Scoped() { slot = nullptr; }
    } scoped{m_recording = &r};
    OSPREY_CHECK(r.record([&]() -> osprey::Result<void> {
      r.recorded = OSPREY_TRY(decodeHiddenStep(*this, w, views, token));
      return r.launchChoiceFromHidden(*this, w, r.recorded->hidden);
    }));
  }
  const osprey::Index replays = count - 1;
  auto replayed = [&]() -> osprey::Result<std::vector<int>> {
    OSPREY_CHECK(r.queue(0));
    std::vector<int> out{OSPREY_TRY(r.awaitFirst())};
    OSPREY_CHECK(onToken(out.back()));
    for (osprey::Index i = 0; i < replays; ++i) {
      if (i + 1 < replays) OSPREY_CHECK(r.queue(i + 1));  // the device goes on while the host streams
      out.push_back(OSPREY_TRY(r.await(i)));
      OSPREY_CHECK(onToken(out.back()));
    }
    return out;
  }();
  // A fault a replayed kernel recorded (the reference kernels keep their checks) is found and named
  // here, on the recording's stream, before anything else runs on the device.
  OSPREY_CHECK(device->flush());
  osprey::cuda_detail::traceFinish();
  return replayed;
}

}  // namespace gpt2
