// The exact cuda handler's decoding from a recorded step (gpt2/cuda/recorded_cuda.hpp): the same
// tokens as the step-by-step continuation and as lists, streamed in order, and the device as it
// was afterwards.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpt2/cuda/recorded_cuda.hpp"
#include "gpt2/model_cases.hpp"
#include "handlers.hpp"

namespace gpt2::testing {
namespace {

RecordedCuda makeRecorded() {
  auto device = osprey::CudaDevice::open();
  if (!device.ok()) throw std::runtime_error(device.error().message);
  return RecordedCuda(*device);
}

template <class T>
T ok(osprey::Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}

// The lively model's 20 tokens vary and equal the full recomputation's and lists'.
TEST(RecordedDecoding, LivelyGenerationVariesAndIsTheReferences) {
  auto h = makeRecorded();
  livelyGenerationVariesAndIsTheReferences(h);
}

// Replayed and stepped continuations give the same tokens, streamed in order, from prompts of one
// token, of five, and of three short of the context (the last replays write the context's last
// positions); the device's stream is its own again afterwards and the full pass unchanged.
TEST(RecordedDecoding, EqualsStepByStep) {
  auto h = makeRecorded();
  const auto w = livelyTinyOn(h);
  const auto before = fullLogits(h, w, kPrompt);
  std::vector<int> nearTheEnd(static_cast<std::size_t>(w.config.maxT - 3));
  for (std::size_t i = 0; i < nearTheEnd.size(); ++i) nearTheEnd[i] = static_cast<int>((i * 7919) % 50257);
  for (const std::vector<int>& prompt : {kPrompt, std::vector<int>{464}, nearTheEnd}) {
    SCOPED_TRACE(::testing::Message() << prompt.size() << "-token prompt");
    const Index count = std::min<Index>(40, w.config.maxT - static_cast<Index>(prompt.size()));
    auto continuation = [&](bool recorded, std::vector<int>* streamed) {
      h.setRecordedDecoding(recorded);
      return ok(generateGreedy(h, w, std::span<const int>(prompt), count, [&](int id) -> osprey::Result<void> {
        streamed->push_back(id);
        return {};
      }));
    };
    std::vector<int> streamedReplayed, streamedStepped;
    const auto replayed = continuation(true, &streamedReplayed);
    const auto stepped = continuation(false, &streamedStepped);
    EXPECT_EQ(replayed, stepped);
    EXPECT_EQ(streamedReplayed, replayed);
    EXPECT_EQ(replayed.size(), static_cast<std::size_t>(count));
    EXPECT_EQ(h.runtime()->stream(), nullptr) << "the recording's stream outlived it";
    if (count >= 40) {  // a constant continuation would not show a replay stuck at one position
      const std::set<int> distinct(replayed.begin(), replayed.end());
      EXPECT_GE(distinct.size(), 10u) << "the continuation is too uniform to test the replay";
    }
  }
  h.setRecordedDecoding(true);
  EXPECT_EQ(fullLogits(h, w, kPrompt), before);
}

// Logits without a finite maximum (every position's embedding NaN from `from` on) stop the
// replayed continuation with the step-by-step one's error, after the same streamed tokens: at the
// first token (chosen before the first replay) and in a replay.
TEST(RecordedDecoding, StopsWhereTheLogitsHaveNoFiniteMaximum) {
  auto h = makeRecorded();
  const Index C = tinyWeights().config.C, maxT = tinyWeights().config.maxT;
  for (const Index from : {Index{0}, Index{8}}) {
    SCOPED_TRACE(::testing::Message() << "wpe NaN from position " << from);
    HostWeights host = livelyTinyWeights();
    for (Index i = from * C; i < maxT * C; ++i) host.tensors[kWpeIndex].values[static_cast<std::size_t>(i)] = std::nan("");
    const auto w = forwardOn(h, host);
    std::vector<int> streamed[2];
    std::string errors[2];
    for (const bool recorded : {true, false}) {
      h.setRecordedDecoding(recorded);
      auto refused = generateGreedy(h, w, std::span<const int>(kPrompt), 20, [&](int id) -> osprey::Result<void> {
        streamed[recorded].push_back(id);
        return {};
      });
      ASSERT_FALSE(refused.ok());
      errors[recorded] = refused.error().message;
      EXPECT_EQ(h.runtime()->stream(), nullptr);
    }
    EXPECT_EQ(errors[1], errors[0]);
    EXPECT_NE(errors[1].find("largest logit"), std::string::npos) << errors[1];
    EXPECT_EQ(streamed[1], streamed[0]);
    EXPECT_EQ(streamed[1].size(), from == 0 ? 0u : 4u);  // positions 5, 6 and 7, and the first
  }
}

// The one-launch LayerNorm (gpt2/cuda/layernorm_rows.hpp) gives the reference's out, mean and
// rstd bit for bit: one row (decoding) and many, GPT-2's widths, ragged and tiny ones, the longest
// row its shared memory holds and one beyond it (the reference's own path); rows of large values
// with a small spread (the variance's cancellation), wide exponents, zeros and negative zeros.
TEST(RecordedDecoding, OneLaunchLayerNormIsTheReferences) {
  auto h = makeRecorded();
  std::mt19937_64 rng(4242);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  struct Shape {
    Index N, C;
  };
  for (const Shape s : {Shape{1, 768}, Shape{1, 1}, Shape{1, 1600}, Shape{5, 768}, Shape{3, 1600}, Shape{64, 1024},
                        Shape{4096, 768}, Shape{7, 13}, Shape{9, 6143}, Shape{2, 6144}, Shape{33, 1280}}) {
    SCOPED_TRACE(::testing::Message() << s.N << " rows of " << s.C);
    std::vector<Scalar> x(static_cast<std::size_t>(s.N * s.C)), w(static_cast<std::size_t>(s.C)),
        b(static_cast<std::size_t>(s.C));
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Index row = static_cast<Index>(i) / s.C;
      switch (row % 4) {
        case 0: x[i] = unit(rng); break;
        case 1: x[i] = 1e6 + unit(rng) * 1e-3; break;  // the variance cancels
        case 2: x[i] = std::ldexp(unit(rng), exponent(rng)); break;
        default: x[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? -0.0 : unit(rng) * 1e-300; break;
      }
    }
    for (auto& v : w) v = unit(rng) * 2.0;
    for (std::size_t c = 0; c < b.size(); ++c) b[c] = c % 5 == 0 ? -0.0 : unit(rng);
    const auto xb = ok(h.fromList(x)), wb = ok(h.fromList(w)), bb = ok(h.fromList(b));
    const auto fused = ok(h.layernormForward(xb, wb, bb, s.N, s.C));
    const auto ref = ok(reference::layernormForward(h, xb, wb, bb, s.N, s.C));
    EXPECT_SAME_BITS(osprey::testing::readAll(h, fused.out), osprey::testing::readAll(h, ref.out));
    EXPECT_SAME_BITS(osprey::testing::readAll(h, fused.mean), osprey::testing::readAll(h, ref.mean));
    EXPECT_SAME_BITS(osprey::testing::readAll(h, fused.rstd), osprey::testing::readAll(h, ref.rstd));
  }
}

// A cache that does not fit the model is refused before anything is recorded.
TEST(RecordedDecoding, RefusesAForeignCache) {
  auto h = makeRecorded();
  const auto w = tinyOn(h);
  auto step = ok(prefill(h, w, tokensOn(h, kPrompt), static_cast<Index>(kPrompt.size())));
  step.cache.layers.pop_back();
  auto none = [](int) -> osprey::Result<void> { return {}; };
  auto refused = continueGreedy(h, w, step, 5, none);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("the cache has 1 blocks, the model 2"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(h.runtime()->stream(), nullptr);
}

}  // namespace
}  // namespace gpt2::testing
