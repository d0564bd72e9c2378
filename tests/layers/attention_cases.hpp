// Causal self-attention cases (forward, backward, KV-cache decode), generic over the handler.
#pragma once

#include <limits>

#include "layers/layer_support.hpp"

namespace gpt2::testing::attention_cases {

struct Reference {
  std::vector<Scalar> out, att;
};

// The textbook loop: scores, max-subtracted softmax over the causal prefix, weighted values.
inline Reference referenceForward(const std::vector<Scalar>& qkv, Index B, Index T, Index C, Index NH) {
  const Index hs = C / NH;
  Reference r{std::vector<Scalar>(B * T * C), std::vector<Scalar>(B * NH * T * T, 0.0)};
  for (Index b = 0; b < B; ++b)
    for (Index h = 0; h < NH; ++h)
      for (Index t = 0; t < T; ++t) {
        std::vector<Scalar> s(t + 1);
        Scalar m = -std::numeric_limits<Scalar>::infinity();
        for (Index t2 = 0; t2 <= t; ++t2) {
          Scalar d = 0;
          for (Index i = 0; i < hs; ++i)
            d += qkv[(b * T + t) * 3 * C + h * hs + i] * qkv[(b * T + t2) * 3 * C + C + h * hs + i];
          s[t2] = d / std::sqrt(static_cast<Scalar>(hs));
          m = std::max(m, s[t2]);
        }
        Scalar z = 0;
        for (Index t2 = 0; t2 <= t; ++t2) z += std::exp(s[t2] - m);
        Scalar* a = &r.att[((b * NH + h) * T + t) * T];
        for (Index t2 = 0; t2 <= t; ++t2) a[t2] = std::exp(s[t2] - m) / z;
        for (Index i = 0; i < hs; ++i) {
          Scalar acc = 0;
          for (Index t2 = 0; t2 <= t; ++t2) acc += a[t2] * qkv[(b * T + t2) * 3 * C + 2 * C + h * hs + i];
          r.out[(b * T + t) * C + h * hs + i] = acc;
        }
      }
  return r;
}

template <class H>
void forwardMatchesLoop(H& h) {
  const Index B = 2, T = 5, C = 6, NH = 2;  // hs = 3: 1/sqrt(hs) is not exact
  const auto qkv = randomValues(B * T * 3 * C, 121, -2.0, 2.0);
  auto got = must(attentionForward(h, lift(h, qkv), B, T, C, NH));
  const auto want = referenceForward(qkv, B, T, C, NH);
  expectClose(readAll(h, got.out), want.out, kForwardRtol, kForwardAtol, "attention out");
  expectClose(readAll(h, got.att), want.att, kForwardRtol, kForwardAtol, "attention att");
}

// Above the diagonal att is exactly 0, and the first query attends only to itself (att = 1).
template <class H>
void attIsCausal(H& h) {
  const Index B = 1, T = 4, C = 4, NH = 2;
  auto got = readAll(h, must(attentionForward(h, lift(h, randomValues(B * T * 3 * C, 131)), B, T, C, NH)).att);
  for (Index hh = 0; hh < NH; ++hh) {
    EXPECT_EQ(got[hh * T * T], 1.0);
    for (Index t = 0; t < T; ++t)
      for (Index t2 = t + 1; t2 < T; ++t2) EXPECT_EQ(got[(hh * T + t) * T + t2], 0.0);
  }
}

template <class H>
void backwardMatchesFiniteDifferences(H& h) {
  const Index B = 2, T = 4, C = 6, NH = 2;
  const auto qkv = randomValues(B * T * 3 * C, 141, -1.5, 1.5), r = randomValues(B * T * C, 142);
  auto fwd = must(attentionForward(h, lift(h, qkv), B, T, C, NH));
  auto dqkv = must(attentionBackward(h, lift(h, r), lift(h, qkv), fwd.att, B, T, C, NH));
  auto loss = [&](const std::vector<Scalar>& x) {
    return weightedSum(readAll(h, must(attentionForward(h, lift(h, x), B, T, C, NH)).out), r);
  };
  expectClose(readAll(h, dqkv), numericGradient(qkv, loss), kGradRtol, kGradAtol, "attention dqkv");
}

// KV-cache decoding: one position at a time, against caches grown with appendRow, gives row t
// of the full forward bit for bit.
template <class H>
void decodeEqualsForwardRows(H& h) {
  const Index T = 7, C = 8, NH = 2;
  const auto qkv = randomValues(T * 3 * C, 151, -2.0, 2.0);
  auto qkvBuf = lift(h, qkv);
  const auto full = readAll(h, must(attentionForward(h, qkvBuf, 1, T, C, NH)).out);
  auto kCache = lift(h, {}), vCache = lift(h, {});
  for (Index t = 0; t < T; ++t) {
    auto qkvRow = lift(h, std::vector<Scalar>(qkv.begin() + t * 3 * C, qkv.begin() + (t + 1) * 3 * C));
    kCache = must(appendRow(h, kCache, must(sliceColumns(h, qkvRow, 1, 3 * C, C, C)), t, C));
    vCache = must(appendRow(h, vCache, must(sliceColumns(h, qkvRow, 1, 3 * C, 2 * C, C)), t, C));
    const auto got = readAll(h, must(attentionDecode(h, qkvRow, kCache, vCache, t + 1, C, NH)));
    const std::vector<Scalar> want(full.begin() + t * C, full.begin() + (t + 1) * C);
    EXPECT_TRUE(osprey::testing::sameBits(got, want)) << "position " << t;
  }
}

template <class H>
void appendRowAppends(H& h) {
  auto cache = lift(h, {1, 2, 3, 4});
  auto grown = must(appendRow(h, cache, lift(h, {5, 6}), 2, 2));
  EXPECT_SAME_BITS(readAll(h, grown), (std::vector<Scalar>{1, 2, 3, 4, 5, 6}));
  expectError(appendRow(h, cache, lift(h, {5, 6, 7}), 2, 2), "appendRow: row has 3 elements");
}

template <class H>
void rejectsHeadsThatDoNotDivide(H& h) {
  expectError(attentionForward(h, lift(h, randomValues(2 * 3 * 5, 161)), 1, 2, 5, 2),
              "5 channels do not split into 2 heads");
}

// The linear layer in front of attention and attention (layers/projected.hpp) are
// those two layers one after the other, bit for bit; a weight of the wrong shape is an error that
// names it.
template <class H>
void projectedAttentionIsItsTwoLayers(H& h) {
  const Index B = 2, T = 3, C = 4, NH = 2, N = B * T;
  auto x = lift(h, randomValues(N * C, 162)), w = lift(h, randomValues(C * 3 * C, 163));
  auto bias = lift(h, randomValues(3 * C, 164));
  const auto pair = must(matmulAttentionForward(h, x, w, bias, B, T, C, NH));
  const auto qkv = must(matmulForward(h, x, w, bias, N, C, 3 * C));
  const auto attn = must(attentionForward(h, qkv, B, T, C, NH));
  EXPECT_EQ(readAll(h, pair.qkv), readAll(h, qkv));
  EXPECT_EQ(readAll(h, pair.attn.out), readAll(h, attn.out));
  EXPECT_EQ(readAll(h, pair.attn.att), readAll(h, attn.att));
  expectError(matmulAttentionForward(h, x, lift(h, randomValues(C * 3 * C - 1, 165)), bias, B, T, C, NH),
              "weight has 47 elements, expected 48");
}

}  // namespace gpt2::testing::attention_cases
