// A model of its own, written once against the Tensor effect: the two-layer perceptron
// y = tanh(x W1 + b1) W2 on a batch of 4 inputs of 3 features, its squared-error loss, one
// gradient step on W2, and the loss again. It runs on lists, gpu on the host device and, where
// the install has the opencl device and this build links it (Osprey::opencl), gpu on opencl, and
// exits 1 unless they agree to the bit. Its kernels take the handler's KernelIndex/KernelScalar,
// so the opencl device can trace them (osprey/kernel_types.hpp).
#include <cstdio>
#include <cstring>
#include <vector>

#include "osprey/effect.hpp"
#include "osprey/math.hpp"
#include "osprey/under.hpp"

using osprey::Index, osprey::Int, osprey::KernelIndex, osprey::KernelScalar, osprey::Result, osprey::Scalar;
constexpr Index kBatch = 4, kIn = 3, kHidden = 5;

// What a forward pass hands back: the hidden layer and the errors (the gradient needs them) and
// the loss, the sum of squared errors.
template <osprey::Tensor H>
struct Forward {
  osprey::BufferOf<H> hidden, err;
  Scalar loss;
};
// y = tanh(x W1 + b1) W2 against the targets t.
template <osprey::Tensor H, class B = osprey::BufferOf<H>>
Result<Forward<H>> forward(H& h, const B& x, const B& w1, const B& b1, const B& w2, const B& t) {
  auto pre = OSPREY_TRY(h.matMul(x, w1, kBatch, kIn, kHidden));
  const auto pv = pre.view(), bv = b1.view();
  using S = KernelScalar<H>;
  auto hidden = OSPREY_TRY(h.build(kBatch * kHidden, [=] OSPREY_FN(KernelIndex<H> i) -> S {
    return osprey::math::tanh(pv[i] + bv[osprey::asInt(i) % kHidden]);
  }));
  auto y = OSPREY_TRY(h.matMul(hidden, w2, kBatch, kHidden, 1));
  auto err = OSPREY_TRY(h.zipWith(y, t, [] OSPREY_FN(S a, S b) -> S { return a - b; }));
  const Scalar loss = OSPREY_TRY(h.reduce(err, 0.0, [] OSPREY_FN(S acc, S e) -> S { return acc + e * e; }));
  return Forward<H>{hidden, err, loss};
}

// The whole run on handler h: loss before, loss after, and the stepped W2.
template <osprey::Tensor H>
Result<std::vector<Scalar>> run(H& h) {
  std::vector<Scalar> xs, w1s, b1s, w2s, ts;
  for (Index i = 0; i < kBatch * kIn; ++i) xs.push_back(0.25 * (i % 7) - 0.5);
  for (Index i = 0; i < kIn * kHidden; ++i) w1s.push_back(0.1 * ((i * 5) % 11) - 0.5);
  for (Index j = 0; j < kHidden; ++j) b1s.push_back(0.05 * j), w2s.push_back(0.3 - 0.15 * j);
  for (Index b = 0; b < kBatch; ++b) ts.push_back(b % 2 ? 0.5 : -0.5);
  auto x = OSPREY_TRY(h.fromList(xs)), w1 = OSPREY_TRY(h.fromList(w1s)), b1 = OSPREY_TRY(h.fromList(b1s));
  auto w2 = OSPREY_TRY(h.fromList(w2s)), t = OSPREY_TRY(h.fromList(ts));

  auto before = OSPREY_TRY(forward(h, x, w1, b1, w2, t));
  // dLoss/dW2 = 2 err^T hidden: err is a 1 x batch row, hidden is batch x hidden.
  auto grad = OSPREY_TRY(h.matMul(before.err, before.hidden, 1, kBatch, kHidden));
  using S = KernelScalar<H>;
  auto stepped = OSPREY_TRY(h.zipWith(w2, grad, [] OSPREY_FN(S w, S g) -> S { return w - 0.1 * (2.0 * g); }));
  auto after = OSPREY_TRY(forward(h, x, w1, b1, stepped, t));

  std::vector<Scalar> out{before.loss, after.loss};
  for (Index j = 0; j < kHidden; ++j) out.push_back(h.get(stepped, j));
  return out;
}

int main() {
  auto work = [](auto& h) { return run(h); };
  std::vector<Result<std::vector<Scalar>>> results{osprey::onLists(work), osprey::onGpuDevice("host", work)};
  std::vector<const char*> names{"lists", "gpu(host)"};
  if (osprey::kOpenClLinked) {
    results.push_back(osprey::onGpuDevice("opencl", work));
    names.push_back("gpu(opencl)");
  }
  for (std::size_t k = 0; k < results.size(); ++k) {
    if (!results[k].ok()) return std::fprintf(stderr, "%s: %s\n", names[k], results[k].error().message.c_str()), 1;
    const auto& r = *results[k];
    std::printf("%-11s loss %.17g -> %.17g, W2 =", names[k], r[0], r[1]);
    for (std::size_t j = 2; j < r.size(); ++j) std::printf(" %.17g", r[j]);
    std::printf("\n");
    const auto& a = *results[0];
    if (r.size() != a.size() || std::memcmp(r.data(), a.data(), a.size() * sizeof(Scalar)) != 0)
      return std::fprintf(stderr, "%s disagrees with lists\n", names[k]), 1;
  }
  std::printf("all %zu handlers agree to the bit\n", results.size());
  return 0;
}
