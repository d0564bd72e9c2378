// Cross-handler bit identity for the layers: a one-block GPT-2 (every layer, forward and
// backward, plus an AdamW step and KV-cache decoding) run by handler A and handler B must give
// the same doubles in every output and gradient. Shapes are chosen so each large tensor passes
// the host device's parallel threshold (4096 elements) and the matMul tile edges are uneven.
#pragma once

#include <map>
#include <string>

#include "layers/layer_support.hpp"

namespace gpt2::testing::cross_handler_cases {

struct MiniShape {
  Index B = 2, T = 33, C = 64, NH = 4, V = 1031, maxT = 40, posOffset = 3;
  Index N() const { return B * T; }
};

using Tensors = std::map<std::string, std::vector<Scalar>>;

// Every intermediate and gradient of one block's forward + backward, named.
template <class H>
Tensors runMiniBlock(H& h) {
  const MiniShape s;
  const Index N = s.N(), C = s.C, V = s.V;
  Tensors out;
  auto keep = [&](const std::string& name, const Buf<H>& b) { out[name] = readAll(h, b); };
  using Named = std::vector<std::pair<std::string, Buf<H>>>;
  auto param = [&](Index n, std::uint64_t seed, Scalar scale) {
    return lift(h, randomValues(static_cast<std::size_t>(n), seed, -scale, scale));
  };
  auto tokens = lift(h, randomTokens(N, V, 301));
  auto targets = lift(h, randomTokens(N, V, 302));
  auto wte = param(V * C, 303, 0.5), wpe = param(s.maxT * C, 304, 0.5);
  auto ln1w = param(C, 305, 1.0), ln1b = param(C, 306, 0.1), ln2w = param(C, 307, 1.0), ln2b = param(C, 308, 0.1);
  auto lnfw = param(C, 309, 1.0), lnfb = param(C, 310, 0.1);
  auto wqkv = param(C * 3 * C, 311, 0.3), bqkv = param(3 * C, 312, 0.1);
  auto wproj = param(C * C, 313, 0.2), bproj = param(C, 314, 0.1);
  auto wfc = param(C * 4 * C, 315, 0.2), bfc = param(4 * C, 316, 0.1);
  auto wfcp = param(4 * C * C, 317, 0.1), bfcp = param(C, 318, 0.1);

  // forward
  auto x0 = must(encoderForward(h, tokens, wte, wpe, N, s.T, C, s.posOffset));
  auto ln1 = must(layernormForward(h, x0, ln1w, ln1b, N, C));
  auto qkv = must(matmulForward(h, ln1.out, wqkv, bqkv, N, C, 3 * C));
  auto att = must(attentionForward(h, qkv, s.B, s.T, C, s.NH));
  auto proj = must(matmulForward(h, att.out, wproj, bproj, N, C, C));
  auto x1 = must(residualForward(h, x0, proj));
  auto ln2 = must(layernormForward(h, x1, ln2w, ln2b, N, C));
  auto fc = must(matmulForward(h, ln2.out, wfc, bfc, N, C, 4 * C));
  auto act = must(geluForward(h, fc));
  auto fcp = must(matmulForward(h, act, wfcp, bfcp, N, 4 * C, C));
  auto x2 = must(residualForward(h, x1, fcp));
  auto lnf = must(layernormForward(h, x2, lnfw, lnfb, N, C));
  auto logits = must(matmulForwardTransposed(h, lnf.out, wte, N, C, V));
  auto ce = must(crossEntropyForward(h, logits, targets, N, V));
  for (const auto& [name, b] : Named{{"x0", x0}, {"ln1", ln1.out}, {"ln1.mean", ln1.mean}, {"ln1.rstd", ln1.rstd},
                         {"qkv", qkv}, {"att", att.att}, {"att.out", att.out}, {"x1", x1}, {"fc", fc},
                         {"gelu", act}, {"x2", x2}, {"lnf", lnf.out}, {"logits", logits},
                         {"probs", ce.probs}, {"losses", ce.losses}})
    keep(name, b);
  out["loss"] = {must(meanLoss(h, ce.losses))};

  // backward
  auto dlogits = must(crossEntropyBackward(h, ce.probs, targets, N, V, 1.0 / static_cast<Scalar>(N)));
  auto gHead = must(matmulBackwardTransposed(h, dlogits, lnf.out, wte, N, C, V));
  auto gLnf = must(layernormBackward(h, gHead.dx, x2, lnfw, lnf.mean, lnf.rstd, N, C));
  auto gFcp = must(matmulBackward(h, gLnf.dx, act, wfcp, N, 4 * C, C));
  auto dfc = must(geluBackward(h, gFcp.dx, fc));
  auto gFc = must(matmulBackward(h, dfc, ln2.out, wfc, N, C, 4 * C));
  auto gLn2 = must(layernormBackward(h, gFc.dx, x1, ln2w, ln2.mean, ln2.rstd, N, C));
  auto dx1 = must(add(h, gLnf.dx, gLn2.dx));
  auto gProj = must(matmulBackward(h, dx1, att.out, wproj, N, C, C));
  auto dqkv = must(attentionBackward(h, gProj.dx, qkv, att.att, s.B, s.T, C, s.NH));
  auto gQkv = must(matmulBackward(h, dqkv, ln1.out, wqkv, N, C, 3 * C));
  auto gLn1 = must(layernormBackward(h, gQkv.dx, x0, ln1w, ln1.mean, ln1.rstd, N, C));
  auto dx0 = must(add(h, dx1, gLn1.dx));
  auto gEnc = must(encoderBackward(h, dx0, tokens, N, s.T, C, V, s.maxT, s.posOffset));
  auto dwte = must(encoderBackwardOnto(h, gHead.dwt, dx0, tokens, N, s.T, C, V, s.maxT, s.posOffset)).dwte;
  for (const auto& [name, b] : Named{{"dlogits", dlogits}, {"head.dx", gHead.dx}, {"head.dwt", gHead.dwt},
                         {"lnf.dx", gLnf.dx}, {"lnf.dw", gLnf.dw}, {"lnf.db", gLnf.db},
                         {"fcp.dx", gFcp.dx}, {"fcp.dw", gFcp.dw}, {"fcp.dbias", gFcp.dbias}, {"gelu.dx", dfc},
                         {"fc.dw", gFc.dw}, {"fc.dbias", gFc.dbias}, {"ln2.dx", gLn2.dx}, {"ln2.dw", gLn2.dw},
                         {"proj.dw", gProj.dw}, {"dqkv", dqkv}, {"qkv.dw", gQkv.dw}, {"qkv.dbias", gQkv.dbias},
                         {"ln1.dx", gLn1.dx}, {"ln1.dw", gLn1.dw}, {"ln1.db", gLn1.db},
                         {"dwte.enc", gEnc.dwte}, {"dwpe", gEnc.dwpe}, {"dwte", dwte}})
    keep(name, b);

  // one AdamW step on the tied embedding (decayed) and a bias (not decayed)
  auto zeros = [&](Index n) { return lift(h, std::vector<Scalar>(static_cast<std::size_t>(n), 0.0)); };
  const AdamWSettings adam{6e-4, 0.9, 0.95, 1e-8, 0.1};
  auto stepWte = must(adamwUpdate(h, wte, dwte, zeros(V * C), zeros(V * C), 1, adam, true));
  auto stepBias = must(adamwUpdate(h, bqkv, gQkv.dbias, zeros(3 * C), zeros(3 * C), 1, adam, false));
  keep("adamw.wte", stepWte.param);
  keep("adamw.wte.m", stepWte.m);
  keep("adamw.wte.v", stepWte.v);
  keep("adamw.bqkv", stepBias.param);

  // KV-cache decoding of the first sequence's last position
  auto kAll = must(sliceColumns(h, qkv, N, 3 * C, C, C));      // (N, C)
  auto vAll = must(sliceColumns(h, qkv, N, 3 * C, 2 * C, C));  // (N, C)
  auto lastRow = lift(h, std::vector<Scalar>(out["qkv"].begin() + (s.T - 1) * 3 * C,
                                             out["qkv"].begin() + s.T * 3 * C));
  const auto kHost = readAll(h, kAll), vHost = readAll(h, vAll);
  auto kCache = lift(h, std::vector<Scalar>(kHost.begin(), kHost.begin() + s.T * C));
  auto vCache = lift(h, std::vector<Scalar>(vHost.begin(), vHost.begin() + s.T * C));
  keep("decode", must(attentionDecode(h, lastRow, kCache, vCache, s.T, C, s.NH)));
  return out;
}

// Every named tensor of A equals B's, bit for bit.
template <class A, class B>
void miniBlockIsBitIdentical() {
  A a = osprey::testing::makeHandler<A>();
  B b = osprey::testing::makeHandler<B>();
  const Tensors ta = runMiniBlock(a), tb = runMiniBlock(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, va] : ta) {
    const auto& vb = tb.at(name);
    const std::size_t at = osprey::testing::firstBitDifference(va, vb);
    EXPECT_TRUE(osprey::testing::sameBits(va, vb))
        << name << ": first difference at element " << at << " of " << va.size()
        << (at < va.size() && at < vb.size() ? " (" + std::to_string(va[at]) + " vs " + std::to_string(vb[at]) + ")" : "");
  }
  // The decode row is the forward's row T-1 of the first sequence, bit for bit.
  const MiniShape s;
  const auto& full = ta.at("att.out");
  const std::vector<Scalar> row(full.begin() + (s.T - 1) * s.C, full.begin() + s.T * s.C);
  EXPECT_TRUE(osprey::testing::sameBits(ta.at("decode"), row));
}

}  // namespace gpt2::testing::cross_handler_cases
