// The exact cuda handler's decoding from a recorded step (gpt2/cuda/recorded_cuda.hpp): the same
// tokens as the step-by-step continuation and as lists, streamed in order, and the device as it
// was afterwards.
#include <gtest/gtest.h>

#include <memory>
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
