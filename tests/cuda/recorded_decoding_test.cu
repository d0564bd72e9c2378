// The exact cuda handler's decoding from a recorded step (gpt2/cuda/recorded_cuda.hpp): the same
// tokens as the step-by-step continuation and as lists, streamed in order, and the device as it
// was afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
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

using osprey::Index;
using osprey::Scalar;

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

void ok(osprey::Result<void> r) {
  if (!r.ok()) throw std::runtime_error(r.error().message);
}

// A row of C values of four kinds (plain, large with a small spread, wide exponents, zeros and tiny
// values), and weights with negative zeros among them.
std::vector<Scalar> kindsOfValues(std::mt19937_64& rng, Index n, int kind) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<Scalar> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (kind % 5) {
      case 0: v[i] = unit(rng); break;
      case 1: v[i] = 1e6 + unit(rng) * 1e-3; break;
      case 2: v[i] = std::ldexp(unit(rng), exponent(rng)); break;
      case 3: v[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? -0.0 : unit(rng) * 1e-300; break;
      default: v[i] = i % 7 == 0 ? -0.0 : unit(rng) * 0.05; break;  // a weight's
    }
  }
  return v;
}

// One decoded row's LayerNorm and linear layer (and GELU) in one launch == the layers one by one
// (the reference LayerNorm, the few-columns product, the bias's build), bit for bit: GPT-2's
// widths (768 to 3072 and 2304 outputs, 1024 wide), ragged and tiny shapes, rows of every kind.
TEST(RecordedDecoding, OneRowNormLinearIsTheLayers) {
  auto h = makeRecorded();
  std::mt19937_64 rng(4545);
  struct Shape {
    Index C, OC;
  };
  for (const Shape s : {Shape{768, 2304}, Shape{768, 3072}, Shape{1024, 4096}, Shape{13, 7}, Shape{1, 1},
                        Shape{64, 5}, Shape{771, 9}}) {
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE(::testing::Message() << s.C << " -> " << s.OC << ", rows of kind " << kind);
      const auto x = ok(h.fromList(kindsOfValues(rng, s.C, kind)));
      const auto lnW = ok(h.fromList(kindsOfValues(rng, s.C, 4))), lnB = ok(h.fromList(kindsOfValues(rng, s.C, 4)));
      const auto wT = ok(h.fromList(kindsOfValues(rng, s.OC * s.C, 4)));
      const auto bias = ok(h.fromList(kindsOfValues(rng, s.OC, 4)));
      const auto ln = ok(gpt2::reference::layernormForward(h, x, lnW, lnB, 1, s.C));
      const auto fused = ok(h.normLinear(x, lnW, lnB, wT, bias, 1, s.C, s.OC));
      const auto layers = ok(gpt2::linear(h, ln.out, wT, bias, 1, s.C, s.OC));
      EXPECT_SAME_BITS(osprey::testing::readAll(h, fused), osprey::testing::readAll(h, layers));
      const auto fusedGelu = ok(h.normLinearGelu(x, lnW, lnB, wT, bias, 1, s.C, s.OC));
      const auto layersGelu = ok(gpt2::linearGelu(h, ln.out, wT, bias, 1, s.C, s.OC));
      EXPECT_SAME_BITS(osprey::testing::readAll(h, fusedGelu), osprey::testing::readAll(h, layersGelu));
    }
  }
}

// One decoded row's LayerNorm (the last one, before the lm head; its chains on the tensor cores) ==
// the reference layer's out, mean and rstd, bit for bit, at every GPT-2 width and ragged ones.
TEST(RecordedDecoding, OneRowLayerNormIsTheLayer) {
  auto h = makeRecorded();
  std::mt19937_64 rng(4646);
  for (const Index C : {768, 1024, 1280, 1600, 13, 1, 17, 771}) {
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE(::testing::Message() << "C " << C << ", a row of kind " << kind);
      const auto x = ok(h.fromList(kindsOfValues(rng, C, kind)));
      const auto w = ok(h.fromList(kindsOfValues(rng, C, 4))), b = ok(h.fromList(kindsOfValues(rng, C, 4)));
      const auto one = ok(h.layernormForward(x, w, b, 1, C));
      const auto layer = ok(gpt2::reference::layernormForward(h, x, w, b, 1, C));
      EXPECT_SAME_BITS(osprey::testing::readAll(h, one.out), osprey::testing::readAll(h, layer.out));
      EXPECT_SAME_BITS(osprey::testing::readAll(h, one.mean), osprey::testing::readAll(h, layer.mean));
      EXPECT_SAME_BITS(osprey::testing::readAll(h, one.rstd), osprey::testing::readAll(h, layer.rstd));
    }
  }
}

// The fused row refuses what the layers refuse: a weight of the wrong length, named.
TEST(RecordedDecoding, OneRowNormLinearRefusesAWrongShape) {
  auto h = makeRecorded();
  const auto x = ok(h.fromList(std::vector<Scalar>(768, 0.5)));
  const auto lnW = ok(h.fromList(std::vector<Scalar>(768, 1.0))), lnB = ok(h.fromList(std::vector<Scalar>(768, 0.0)));
  const auto wT = ok(h.fromList(std::vector<Scalar>(768 * 10, 0.25)));
  const auto bias = ok(h.fromList(std::vector<Scalar>(11, 0.0)));
  const auto shortWeight = h.normLinear(x, lnW, lnB, wT, bias, 1, 768, 11);
  ASSERT_FALSE(shortWeight.ok());
  EXPECT_NE(shortWeight.error().message.find("weight"), std::string::npos) << shortWeight.error().message;
  const auto shortBias = h.normLinear(x, lnW, lnB, wT, bias, 1, 768, 10);
  ASSERT_FALSE(shortBias.ok());
  EXPECT_NE(shortBias.error().message.find("bias"), std::string::npos) << shortBias.error().message;
}

// One decoded row's linear layer and residual in the product's kernel == the product and the build
// of gpt2::linearResidual (linearThen with the residual's element), bit for bit: GPT-2's attention
// and MLP projections (768 and 3072 deep, 1024 and 4096 for the wider sizes), ragged and tiny shapes.
TEST(RecordedDecoding, OneRowLinearResidualIsTheLayers) {
  auto h = makeRecorded();
  std::mt19937_64 rng(5151);
  struct Shape {
    Index IC, OC;
  };
  for (const Shape s : {Shape{768, 768}, Shape{3072, 768}, Shape{1024, 1024}, Shape{4096, 1024}, Shape{13, 7},
                        Shape{1, 1}, Shape{64, 5}, Shape{771, 9}, Shape{5, 1}}) {
    for (int kind = 0; kind < 4; ++kind) {
      SCOPED_TRACE(::testing::Message() << s.IC << " -> " << s.OC << ", rows of kind " << kind);
      const auto in = ok(h.fromList(kindsOfValues(rng, s.IC, kind)));
      const auto x = ok(h.fromList(kindsOfValues(rng, s.OC, kind)));
      const auto wT = ok(h.fromList(kindsOfValues(rng, s.OC * s.IC, 4)));
      const auto bias = ok(h.fromList(kindsOfValues(rng, s.OC, 4)));
      const auto fused = ok(h.linearResidual(x, in, wT, bias, 1, s.IC, s.OC));
      const auto layers = ok(gpt2::linearThen(h, in, wT, bias, 1, s.IC, s.OC, ResidualOf{x.view()}));
      EXPECT_SAME_BITS(osprey::testing::readAll(h, fused), osprey::testing::readAll(h, layers));
    }
  }
  const auto x = ok(h.fromList(std::vector<Scalar>(10, 0.5))), in = ok(h.fromList(std::vector<Scalar>(768, 0.5)));
  const auto wT = ok(h.fromList(std::vector<Scalar>(768 * 10, 0.25))), bias = ok(h.fromList(std::vector<Scalar>(10, 0.0)));
  const auto shortResidual = h.linearResidual(x, in, wT, bias, 1, 768, 11);
  ASSERT_FALSE(shortResidual.ok());
  EXPECT_NE(shortResidual.error().message.find("weight"), std::string::npos) << shortResidual.error().message;
  const auto wideX = h.linearResidual(in, in, wT, bias, 1, 768, 10);
  ASSERT_FALSE(wideX.ok());
  EXPECT_NE(wideX.error().message.find("residual"), std::string::npos) << wideX.error().message;
}

struct AttentionShape {
  Index C, NH, maxT;
};

// *position = value once `cycles` have passed, its dependents let start at once: a kernel launched
// after it as a programmatic dependent (the attention) reads the position before its wait as it was
// before this one.
__global__ void storePositionLate(int* position, int value, long long cycles) {
  osprey::cuda_detail::startDependents();
  for (const long long start = clock64(); clock64() - start < cycles;) {
  }
  *position = value;
}

// The one-launch attention (gpt2/cuda/attend_row.hpp) at position `at` of a context of s.maxT, from
// the row qkv (3C) and caches holding keys and values, against the reference's append and four row
// folds with the position on the device (recorded_cuda.hpp's path for contexts the kernel does not
// take), bit for bit: the output and both caches. With a `stale` position (>= 0) the attention
// starts while the position still holds it: its reads before its wait see that one, not `at`.
void expectAttentionIsTheFolds(RecordedCuda& h, const AttentionShape& s, Index at, const std::vector<Scalar>& qkvRow,
                               const std::vector<Scalar>& keys, const std::vector<Scalar>& values,
                               Index stale = -1) {
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  osprey::GpuBuffer<osprey::CudaDevice, int> position(device, ok(device->template allocate<int>(1)), 1);
  const Index hs = s.C / s.NH;
  ASSERT_TRUE(attend_row::fits(s.maxT, hs));
  const auto qkv = ok(h.fromList(qkvRow));
  const auto keysA = ok(h.fromList(keys)), valuesA = ok(h.fromList(values));
  const auto keysB = ok(h.fromList(keys)), valuesB = ok(h.fromList(values));
  ASSERT_TRUE(device->launchOwn("the test's position", [&](cudaStream_t stream) {
    if (stale < 0) {
      recorded_kernels::storePosition<<<1, 1, 0, stream>>>(position.data(), static_cast<int>(at));
    } else {
      recorded_kernels::storePosition<<<1, 1, 0, stream>>>(position.data(), static_cast<int>(stale));
      storePositionLate<<<1, 1, 0, stream>>>(position.data(), static_cast<int>(at), 1LL << 19);
    }
    return cudaGetLastError();
  }).ok());
  const auto fused = ok(attend_row::attendAppendingOneRow(h, qkv, keysA, valuesA, position.data(), s.maxT, s.C, s.NH));
  ASSERT_TRUE(device->launchOwn("the test's append", [&](cudaStream_t stream) {
    recorded_kernels::appendAtPosition<<<static_cast<unsigned>((s.C + 255) / 256), 256, 0, stream>>>(
        keysB.data(), valuesB.data(), qkv.data(), position.data(), s.C);
    return cudaGetLastError();
  }).ok());
  const auto folds = ok(detail::attendCached(h, qkv, keysB, valuesB, s.NH * s.maxT, s.maxT, s.C, s.NH, hs,
                                             recorded_detail::ScoreRowsUpToPosition{position.data(), s.maxT, hs},
                                             recorded_detail::UpToPosition{position.data()}));
  EXPECT_SAME_BITS(osprey::testing::readAll(h, fused), osprey::testing::readAll(h, folds));
  EXPECT_SAME_BITS(osprey::testing::readAll(h, keysA), osprey::testing::readAll(h, keysB));
  EXPECT_SAME_BITS(osprey::testing::readAll(h, valuesA), osprey::testing::readAll(h, valuesB));
}

// One decoded position's attention in one launch == the reference's folds, for GPT-2's head shapes
// and ragged ones, at the first, a middle and the last position of the context, with queries and
// keys of every kind (exp underflowing to zero across a wide spread, equal scores, negative zeros).
TEST(RecordedDecoding, OneRowAttentionIsTheFolds) {
  auto h = makeRecorded();
  std::mt19937_64 rng(7331);
  for (const AttentionShape s : {AttentionShape{768, 12, 1024}, AttentionShape{1024, 16, 1024},
                                 AttentionShape{256, 2, 300}, AttentionShape{15, 3, 37}, AttentionShape{4, 4, 9}}) {
    for (const Index at : {Index{0}, Index{1}, Index{16}, s.maxT / 2 + 3, s.maxT - 1}) {
      if (at >= s.maxT) continue;
      for (int kind = 0; kind < 5; ++kind) {
        SCOPED_TRACE(::testing::Message() << "C " << s.C << ", " << s.NH << " heads, context " << s.maxT
                                          << ", position " << at << ", values of kind " << kind);
        const auto qkv = kindsOfValues(rng, 3 * s.C, kind);
        const auto keys = kindsOfValues(rng, s.maxT * s.C, kind), values = kindsOfValues(rng, s.maxT * s.C, 0);
        expectAttentionIsTheFolds(h, s, at, qkv, keys, values);
      }
    }
  }
}

// Scores that are not finite, as the folds take them: keys whose every product with the query is
// -inf (each channel an infinity of the sign opposite the query's) at the first position, at some
// or at every position (exp(-inf - m) is 0 where the maximum is finite; where every score is -inf,
// NaN), a key whose products are +inf, and keys holding a NaN with a payload at the first position
// (the maximum's fold keeps a NaN it starts from) or a later one (the fold passes it over, its exp
// does not): whatever finds the maximum must give the fold's value.
TEST(RecordedDecoding, OneRowAttentionTakesScoresThatAreNotFinite) {
  auto h = makeRecorded();
  std::mt19937_64 rng(4242);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::bit_cast<double>(std::uint64_t{0x7ff80000deadbeefULL});
  enum Case { FirstMinusInf, SomeMinusInf, AllMinusInf, PlusInf, FirstNaN, LaterNaN };
  for (const AttentionShape s : {AttentionShape{768, 12, 1024}, AttentionShape{15, 3, 37}}) {
    for (const Index at : {Index{0}, Index{1}, Index{16}, Index{33}, s.maxT - 1}) {
      if (at >= s.maxT) continue;
      for (const Case c : {FirstMinusInf, SomeMinusInf, AllMinusInf, PlusInf, FirstNaN, LaterNaN}) {
        SCOPED_TRACE(::testing::Message() << "C " << s.C << ", position " << at << ", case " << c);
        auto qkv = kindsOfValues(rng, 3 * s.C, 0);
        auto keys = kindsOfValues(rng, s.maxT * s.C, 0);
        const auto values = kindsOfValues(rng, s.maxT * s.C, 0);
        // Key p's channels: in the cache for p < at, in qkv's key part for p == at.
        const auto keyAt = [&](Index p, Index ch) -> double& {
          return p == at ? qkv[static_cast<std::size_t>(s.C + ch)] : keys[static_cast<std::size_t>(p * s.C + ch)];
        };
        const auto productsOf = [&](Index p, double sign) {
          for (Index ch = 0; ch < s.C; ++ch)
            keyAt(p, ch) = qkv[static_cast<std::size_t>(ch)] > 0 ? sign * inf : -sign * inf;
        };
        for (Index p = 0; p <= at; ++p) {
          switch (c) {
            case FirstMinusInf: if (p == 0) productsOf(p, -1.0); break;
            case SomeMinusInf: if (p % 3 != 1) productsOf(p, -1.0); break;
            case AllMinusInf: productsOf(p, -1.0); break;
            case PlusInf: if (p == at / 2) productsOf(p, 1.0); break;
            case FirstNaN: if (p == 0) keyAt(p, s.C - 1) = nan; break;
            case LaterNaN: if (p == (at + 1) / 2) keyAt(p, 0) = nan; break;
          }
        }
        expectAttentionIsTheFolds(h, s, at, qkv, keys, values);
      }
    }
  }
}

// The attention's blocks load keys before their wait at the position the position held then (in a
// replay, this step's): where it was another (earlier, later, the first), the attention is still
// the folds', bit for bit.
TEST(RecordedDecoding, OneRowAttentionTakesAStalePosition) {
  auto h = makeRecorded();
  std::mt19937_64 rng(9001);
  for (const AttentionShape s :
       {AttentionShape{768, 12, 1024}, AttentionShape{256, 2, 300}, AttentionShape{15, 3, 37}}) {
    for (const Index at : {Index{1}, Index{16}, Index{33}, s.maxT - 1}) {
      for (const Index stale : {Index{0}, at - 1, at + 1, Index{20}, s.maxT - 1}) {
        if (at >= s.maxT || stale == at || stale >= s.maxT) continue;
        SCOPED_TRACE(::testing::Message() << "C " << s.C << ", position " << at << ", stale position " << stale);
        const auto qkv = kindsOfValues(rng, 3 * s.C, 0);
        const auto keys = kindsOfValues(rng, s.maxT * s.C, 2), values = kindsOfValues(rng, s.maxT * s.C, 0);
        expectAttentionIsTheFolds(h, s, at, qkv, keys, values, stale);
      }
    }
  }
}

// The one-launch attention refuses a context or head it cannot hold, and caches of the wrong size.
TEST(RecordedDecoding, OneRowAttentionRefusesWhatItCannotHold) {
  auto h = makeRecorded();
  const std::shared_ptr<osprey::CudaDevice>& device = h.runtime();
  osprey::GpuBuffer<osprey::CudaDevice, int> position(device, ok(device->template allocate<int>(1)), 1);
  EXPECT_FALSE(attend_row::fits(8192, 64));
  EXPECT_FALSE(attend_row::fits(1024, 256));
  const auto qkv = ok(h.fromList(std::vector<Scalar>(3 * 512, 0.5)));
  const auto room = ok(h.fromList(std::vector<Scalar>(16 * 512, 0.25)));
  const auto wideHeads = attend_row::attendAppendingOneRow(h, qkv, room, room, position.data(), 16, 512, 2);
  ASSERT_FALSE(wideHeads.ok());
  EXPECT_NE(wideHeads.error().message.find("heads of 256 do not fit"), std::string::npos) << wideHeads.error().message;
  const auto shortCache = attend_row::attendAppendingOneRow(h, qkv, room, room, position.data(), 17, 512, 8);
  ASSERT_FALSE(shortCache.ok());
  EXPECT_NE(shortCache.error().message.find("key cache"), std::string::npos) << shortCache.error().message;
}

// What a greedy choice writes: the token, the largest logit, the position after it and the next
// step's embedding.
struct ChoiceWrites {
  int token = 0, position = 0;
  std::vector<Scalar> best, embedding;
};

// The choice at position 0 of a model whose lm head is wte (V, C), from the hidden row x (C): the
// bounded choice (gpt2/cuda/bounded_choice.hpp) or chooseThenEmbed on every logit of the lm head's
// product.
ChoiceWrites chooseAtZero(RecordedCuda& h, const std::vector<Scalar>& x, const std::vector<Scalar>& wte, Index V,
                          Index C, bool bounded) {
  const auto& device = h.runtime();
  const Index maxT = 3;
  std::vector<Scalar> wpeValues(static_cast<std::size_t>(maxT * C));
  for (std::size_t i = 0; i < wpeValues.size(); ++i) wpeValues[i] = 0.001 * static_cast<double>(i % 97) - 0.03;
  const auto hidden = ok(h.fromList(x)), weights = ok(h.fromList(wte)), wpe = ok(h.fromList(wpeValues));
  auto position = ok(osprey::gpuAllocate<int>(device, 1)), tokens = ok(osprey::gpuAllocate<int>(device, maxT));
  auto bests = ok(osprey::gpuAllocate<double>(device, maxT)), embedding = ok(osprey::gpuAllocate<double>(device, C));
  recorded_kernels::storePosition<<<1, 1>>>(position.data(), 0);
  if (bounded) {
    auto choice = ok(bounded_choice::Choice::make(device, weights.data(), V, C, nullptr));
    ok(choice.launch(hidden.data(), nullptr, position.data(), tokens.data(), bests.data(), embedding.data(), wpe.data(),
                     maxT));
    ok(device->flush());  // before the choice's buffers go
  } else {
    const auto logits = ok(lmHeadOf(h, hidden, weights, 1, C, V));
    recorded_kernels::chooseThenEmbed<<<1, recorded_kernels::kChooseThreads>>>(
        logits.data(), V, position.data(), tokens.data(), bests.data(), embedding.data(), weights.data(), wpe.data(),
        C, maxT);
    ok(device->flush());
  }
  ChoiceWrites out;
  out.best.resize(1);
  out.embedding.resize(static_cast<std::size_t>(C));
  ok(device->download(&out.position, position.data(), 1));
  ok(device->download(&out.token, tokens.data() + 1, 1));
  ok(device->download(out.best.data(), bests.data() + 1, 1));
  if (out.token >= 0) ok(device->download(out.embedding.data(), embedding.data(), C));
  return out;
}

// The bounded choice writes what chooseThenEmbed writes from every exact logit, bit for bit: at
// widths 64, 768 and 1600 (rows longer than a lane holds before its wait), for rows of every kind;
// the largest logit held by several rows (the earliest wins); rows whose half copies are equal and
// whose exact chains differ in their last bits, or not; every row equal (more rows left than the
// choice holds); a weight past the float range, one past the half range only, and a hidden row
// with a NaN (the bounds untrusted: every row's chain); a zero hidden row (every logit +0.0); every
// weight in the half's subnormal range (the bound's term for it); many more candidates than the
// choice has warps (201 rows within 2e-11 of each other, the largest the last row: width 64 stages
// 83 a round, and the candidates come in the order the bounds' atomics give, so a warp a row that
// skipped rows past its 32nd would miss the largest in most runs). Widths that are not whole 16-byte
// pieces of halves do not take it.
TEST(RecordedDecoding, BoundedChoiceIsTheChoiceFromEveryLogit) {
  auto h = makeRecorded();
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> normal(0.0, 1.0);
  struct Shape {
    Index V, C;
  };
  for (const Shape s : {Shape{3001, 64}, Shape{50257, 768}, Shape{777, 1600}}) {
    const auto C = static_cast<std::size_t>(s.C);
    for (int kind = 0; kind < 12; ++kind) {
      SCOPED_TRACE(::testing::Message() << s.V << " rows of " << s.C << ", case " << kind);
      std::vector<Scalar> x(C), wte = kindsOfValues(rng, s.V * s.C, 4);
      for (Scalar& v : x) v = normal(rng);
      if (kind < 5 && kind > 0) x = kindsOfValues(rng, s.C, kind - 1);
      const auto row = [&](Index r) { return wte.begin() + static_cast<std::ptrdiff_t>(r * s.C); };
      std::vector<Scalar> leader(C);  // a row that leads the others: x's direction, scaled
      for (std::size_t k = 0; k < C; ++k) leader[k] = x[k] * 0.02;
      switch (kind) {
        case 5:  // the leader at three rows: the earliest wins
          for (const Index r : {s.V / 3, Index{7}, s.V - 1}) std::copy(leader.begin(), leader.end(), row(r));
          break;
        case 6:  // the leader, and copies one unit in the last place off at one weight each
          std::copy(leader.begin(), leader.end(), row(s.V - 2));
          for (Index r = 1; r < 12; ++r) {
            std::vector<Scalar> near = leader;
            const std::size_t k = static_cast<std::size_t>(r * 37) % C;
            near[k] = std::nextafter(near[k], r % 2 ? HUGE_VAL : -HUGE_VAL);
            std::copy(near.begin(), near.end(), row(r * (s.V / 13)));
          }
          break;
        case 7:  // every row equal
          for (Index r = 0; r < s.V; ++r) std::copy(leader.begin(), leader.end(), row(r));
          break;
        default: break;
      }
      if (kind == 8) wte[C * 5 + 1] = 1e39;  // past the float range
      if (kind == 9) wte[C * 5 + 1] = 7e4;   // past the half range (the copy's), within the float's
      if (kind == 10) {  // every weight in the half's subnormal range: a leader, copies just below it, the rest far below
        for (Scalar& w : wte) w *= 1e-7;
        for (Index r = 1; r < 12; ++r)
          std::transform(leader.begin(), leader.end(), row(r * (s.V / 13)),
                         [](Scalar l) { return std::nextafter(l * 1e-4, 0.0); });
        std::transform(leader.begin(), leader.end(), row(s.V / 2), [](Scalar l) { return l * 1e-4; });
      }
      if (kind == 11) {  // the leader at the last row, 200 rows before it a little below it: all candidates
        for (Index i = 1; i <= 200; ++i)
          std::transform(leader.begin(), leader.end(), row(i * (s.V / 202)),
                         [i](Scalar l) { return l * (1.0 - static_cast<double>(i) * 1e-13); });
        std::copy(leader.begin(), leader.end(), row(s.V - 1));
      }
      if (kind == 4 && s.C == 768) x[100] = std::nan("");
      if (kind == 4 && s.C == 64) std::fill(x.begin(), x.end(), 0.0);
      const ChoiceWrites bounded = chooseAtZero(h, x, wte, s.V, s.C, true);
      const ChoiceWrites every = chooseAtZero(h, x, wte, s.V, s.C, false);
      EXPECT_EQ(bounded.token, every.token);
      EXPECT_EQ(bounded.position, every.position);
      EXPECT_SAME_BITS(bounded.best, every.best);
      EXPECT_SAME_BITS(bounded.embedding, every.embedding);
      if (kind == 5) EXPECT_EQ(every.token, 7);
      if (kind == 7) EXPECT_EQ(every.token, 0);
      if (kind == 11) EXPECT_EQ(every.token, s.V - 1);
    }
  }
  EXPECT_TRUE(bounded_choice::fits(50257, 768));
  EXPECT_FALSE(bounded_choice::fits(50257, 770));
  EXPECT_FALSE(bounded_choice::fits(50257, 772));
  EXPECT_FALSE(bounded_choice::fits(50257, 8192));
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
