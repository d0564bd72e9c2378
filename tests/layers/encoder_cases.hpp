// Encoder (token + position embedding) cases, generic over the handler.
#pragma once

#include "layers/layer_support.hpp"

namespace gpt2::testing::encoder_cases {

struct Shape {
  Index B = 2, T = 3, C = 4, V = 5, maxT = 7, posOffset = 2;
  Index N() const { return B * T; }
};

inline std::vector<Scalar> referenceForward(const Shape& s, const std::vector<Scalar>& tokens,
                                            const std::vector<Scalar>& wte, const std::vector<Scalar>& wpe) {
  std::vector<Scalar> out(static_cast<std::size_t>(s.N() * s.C));
  for (Index n = 0; n < s.N(); ++n)
    for (Index c = 0; c < s.C; ++c) {
      const auto tok = static_cast<Index>(tokens[n]);
      const Index pos = s.posOffset + n % s.T;
      out[n * s.C + c] = wte[tok * s.C + c] + wpe[pos * s.C + c];
    }
  return out;
}

template <class H>
void forwardMatchesLoop(H& h) {
  Shape s;
  // Repeated tokens (1 appears three times) so the backward's gather is exercised.
  const std::vector<Scalar> tokens = {1, 4, 1, 0, 1, 3};
  const auto wte = randomValues(s.V * s.C, 11), wpe = randomValues(s.maxT * s.C, 12);
  auto out = must(encoderForward(h, lift(h, tokens), lift(h, wte), lift(h, wpe), s.N(), s.T, s.C, s.posOffset));
  expectClose(readAll(h, out), referenceForward(s, tokens, wte, wpe), 0.0, 0.0, "encoder out");
}

template <class H>
void backwardMatchesFiniteDifferences(H& h) {
  Shape s;
  const std::vector<Scalar> tokens = {1, 4, 1, 0, 1, 3};
  const auto wte = randomValues(s.V * s.C, 21), wpe = randomValues(s.maxT * s.C, 22);
  const auto r = randomValues(s.N() * s.C, 23);
  auto tok = lift(h, tokens);
  auto grads = must(encoderBackward(h, lift(h, r), tok, s.N(), s.T, s.C, s.V, s.maxT, s.posOffset));
  auto loss = [&](const std::vector<Scalar>& te, const std::vector<Scalar>& pe) {
    auto out = must(encoderForward(h, tok, lift(h, te), lift(h, pe), s.N(), s.T, s.C, s.posOffset));
    return weightedSum(readAll(h, out), r);
  };
  expectClose(readAll(h, grads.dwte),
              numericGradient(wte, [&](const std::vector<Scalar>& x) { return loss(x, wpe); }),
              kGradRtol, kGradAtol, "dwte");
  expectClose(readAll(h, grads.dwpe),
              numericGradient(wpe, [&](const std::vector<Scalar>& x) { return loss(wte, x); }),
              kGradRtol, kGradAtol, "dwpe");
}

// The tied-embedding form: base + gathered sum equals add(base, gathered sum) bit for bit.
template <class H>
void backwardOntoEqualsAdd(H& h) {
  Shape s;
  auto tok = lift(h, std::vector<Scalar>{1, 4, 1, 0, 1, 3});
  auto dout = lift(h, randomValues(s.N() * s.C, 24));
  auto base = lift(h, randomValues(s.V * s.C, 25));
  auto plain = must(encoderBackward(h, dout, tok, s.N(), s.T, s.C, s.V, s.maxT, s.posOffset));
  auto onto = must(encoderBackwardOnto(h, base, dout, tok, s.N(), s.T, s.C, s.V, s.maxT, s.posOffset));
  EXPECT_TRUE(osprey::testing::sameBits(readAll(h, onto.dwte), readAll(h, must(add(h, base, plain.dwte)))));
  EXPECT_TRUE(osprey::testing::sameBits(readAll(h, onto.dwpe), readAll(h, plain.dwpe)));
  expectError(encoderBackwardOnto(h, dout, dout, tok, s.N(), s.T, s.C, s.V, s.maxT, s.posOffset),
              "dwte base has 24 elements, expected 20");
}

template <class H>
void rejectsBadTokensAndPositions(H& h) {
  Shape s;
  const auto wte = lift(h, randomValues(s.V * s.C, 31)), wpe = lift(h, randomValues(s.maxT * s.C, 32));
  for (Scalar bad : {5.0, -1.0, 2.5}) {
    auto tokens = lift(h, std::vector<Scalar>{1, 2, bad, 0, 1, 3});
    expectError(encoderForward(h, tokens, wte, wpe, s.N(), s.T, s.C, s.posOffset), "index out of range");
  }
  auto tokens = lift(h, std::vector<Scalar>{1, 2, 3, 0, 1, 3});
  expectError(encoderForward(h, tokens, wte, wpe, s.N(), s.T, s.C, 5), "exceed the context");
  expectError(encoderForward(h, tokens, wte, wpe, s.N() - 1, s.T, s.C, 0), "tokens has 6 elements");
}

}  // namespace gpt2::testing::encoder_cases
