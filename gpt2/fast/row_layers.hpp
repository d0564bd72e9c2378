// The fast handler's row-wise layers: LayerNorm, cross-entropy, AdamW (and the check of its new
// weights for NaN and infinities) and GELU as the fused float kernels of fast/row_kernels.hpp;
// GELU's backward also with its output's column sums (fast/column_sums.hpp).
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/row_layers.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

namespace fast_detail {
struct TargetIndex {
  osprey::ViewOf<float> targets;
  osprey::Index V;
  OSPREY_FN osprey::Scalar operator()(osprey::Index n) const { return static_cast<osprey::Scalar>(tokenIndex(targets[n], V).raw()); }
};
}  // namespace fast_detail

inline osprey::Result<LayerNormOut<FastHandler>> FastHandler::layernormForward(const Buffer& x, const Buffer& w,
                                                                               const Buffer& b, osprey::Index N,
                                                                               osprey::Index C) {
  const char* L = "layernorm";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, C, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, 1, C, L, "weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, b, 1, C, L, "bias"));
  const int Ci = OSPREY_TRY(fast_detail::intWidth(L, C));
  auto mean = OSPREY_TRY(allocate(N));
  auto rstd = OSPREY_TRY(allocate(N));
  // Every LayerNorm's output is only a linear layer's input: the statistics now (the first
  // launch), the output's floats when something reads them (a launch that writes them alone).
  float* statistics[2] = {mean.data(), rstd.data()};
  auto out = OSPREY_TRY(twinOnly(N * C, [x, w, b, N, Ci, statistics](cudaStream_t stream, float* floats,
                                                                     __nv_bfloat16* twin) mutable {
    if (N == 0) return osprey::Result<void>{};
    const auto kernel = fast_kernels::withHeldGroups(Ci, []<int Groups>(std::integral_constant<int, Groups>) {
      return &fast_kernels::layerNormForward<Groups>;
    });
    kernel<<<fast_kernels::rowBlocks(N), fast_kernels::kRowWarps * 32, 0, stream>>>(
        floats, statistics[0], statistics[1], x.data(), w.data(), b.data(), N, Ci, static_cast<float>(kLayerNormEps),
        twin);
    statistics[0] = statistics[1] = nullptr;
    return fast_detail::launched("fast layernorm launch");
  }));
  return LayerNormOut<FastHandler>{std::move(out), std::move(mean), std::move(rstd)};
}

inline osprey::Result<LayerNormGrads<FastHandler>> FastHandler::layernormBackward(
    const Buffer& dout, const Buffer& x, const Buffer& w, const Buffer& mean, const Buffer& rstd, osprey::Index N,
    osprey::Index C) {
  return layernormGradients(nullptr, dout, x, w, mean, rstd, N, C);
}

inline osprey::Result<LayerNormGrads<FastHandler>> FastHandler::residualLayernormBackward(
    const Buffer& dresid, const Buffer& dout, const Buffer& x, const Buffer& w, const Buffer& mean,
    const Buffer& rstd, osprey::Index N, osprey::Index C) {
  return layernormGradients(&dresid, dout, x, w, mean, rstd, N, C);
}

inline osprey::Result<LayerNormGrads<FastHandler>> FastHandler::layernormGradients(
    const Buffer* dresid, const Buffer& dout, const Buffer& x, const Buffer& w, const Buffer& mean,
    const Buffer& rstd, osprey::Index N, osprey::Index C) {
  const char* L = dresid ? "residual layernorm backward" : "layernorm backward";
  if (dresid) OSPREY_CHECK(fast_detail::checkShape(*this, *dresid, N, C, L, "dresid"));
  OSPREY_CHECK(fast_detail::checkShape(*this, dout, N, C, L, "dout"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, C, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, 1, C, L, "weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, mean, N, 1, L, "mean"));
  OSPREY_CHECK(fast_detail::checkShape(*this, rstd, N, 1, L, "rstd"));
  const int Ci = OSPREY_TRY(fast_detail::intWidth(L, C));
  // Each warp's column sums in shared memory: dw's, db's and dx's (the bias gradient of the linear
  // layer whose dout dx is: fast/column_sums.hpp), or without dx's where three sets do not fit a block
  // (rows of about 2,400 columns); rows wider than two sets fit (about 3,600) take the reference
  // definition on this handler.
  // (fast_shapes::layernormBackwardSets decides, as host tests ask it for every GPT-2 size.)
  static_assert(fast_kernels::kRowWarps == fast_shapes::kLayerNormBackwardWarps, "warps whose sums shared memory holds");
  const int sets = fast_shapes::layernormBackwardSets(Ci, m_device->sharedMemoryPerBlock());
  if (sets == 0)
    return dresid ? reference::residualLayernormBackward(*this, *dresid, dout, x, w, mean, rstd, N, C)
                  : reference::layernormBackward(*this, dout, x, w, mean, rstd, N, C);
  const std::size_t shared = fast_shapes::layernormBackwardShared(Ci, sets);
  auto dx = OSPREY_TRY(allocate(N * C));
  auto dw = OSPREY_TRY(allocate(C));
  auto db = OSPREY_TRY(allocate(C));
  Buffer dxSums;
  if (sets == 3) dxSums = OSPREY_TRY(allocate(C));
  // Rows held in registers (fast_kernels::withHeldGroups): the kernel for C's groups.
  const auto kernel = fast_kernels::withHeldGroups(Ci, []<int Groups>(std::integral_constant<int, Groups>) {
    return &fast_kernels::layerNormBackward<Groups>;
  });
  OSPREY_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared)),
                    "fast layernorm backward: shared memory");
  // As many blocks as the multiprocessors hold at once, each warp taking rows a grid apart: one
  // wave, and few partial sums to add.
  int resident = 0;
  OSPREY_CUDA_CHECK(m_occupancy.residentBlocks(&resident, kernel, fast_kernels::kRowWarps * 32, shared),
                    "fast layernorm backward: occupancy");
  const auto blocks = static_cast<int>(std::min<osprey::Index>(std::max<osprey::Index>(fast_kernels::rowBlocks(N), 1),
                                                               osprey::Index{std::max(resident, 1)} *
                                                                   m_device->multiprocessors()));
  auto partials = OSPREY_TRY(allocate(osprey::Index{blocks} * sets * C));
  // dx (the residual stream's gradient, where dresid is given) is the dout of the linear layer
  // before the LayerNorm: its twin is written beside it.
  OSPREY_CHECK(withTwin(dx, [&](__nv_bfloat16* twin) {
    kernel<<<blocks, fast_kernels::kRowWarps * 32, shared, stream()>>>(
        dx.data(), partials.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, Ci,
        dresid ? dresid->data() : nullptr, twin, sets == 3);
    return fast_detail::launched("fast layernorm backward launch");
  }));
  OSPREY_CUDA_CHECK(fast_kernels::launchColumnTotals(
                        stream(), fast_kernels::ColumnSets{{dw.data(), db.data(), dxSums.data()}, Ci}, partials.data(),
                        blocks, sets),
                    "fast layernorm backward: column totals launch");
  if (sets == 3) m_columnSums.keep(dx, C, std::move(dxSums));
  return LayerNormGrads<FastHandler>{std::move(dx), std::move(dw), std::move(db)};
}

inline osprey::Result<int> FastHandler::checkCrossEntropy(const char* layer, const Buffer& table, const char* name,
                                                          const Buffer& targets, osprey::Index N, osprey::Index V) {
  OSPREY_CHECK(fast_detail::checkShape(*this, table, N, V, layer, name));
  OSPREY_CHECK(fast_detail::checkShape(*this, targets, N, 1, layer, "targets"));
  const int width = OSPREY_TRY(fast_detail::intWidth(layer, V));
  (void)OSPREY_TRY(build(targets.size(), fast_detail::TargetIndex{targets.view(), V}));
  return width;
}

inline osprey::Result<CrossEntropyOut<FastHandler>> FastHandler::crossEntropyForward(const Buffer& logits,
                                                                                     const Buffer& targets,
                                                                                     osprey::Index N,
                                                                                     osprey::Index V) {
  const int Vi = OSPREY_TRY(checkCrossEntropy("cross-entropy", logits, "logits", targets, N, V));
  auto probs = OSPREY_TRY(allocate(N * V));
  auto losses = OSPREY_TRY(allocate(N));
  if (N > 0)
    OSPREY_CHECK(crossEntropyRows(probs.data(), losses.data(), logits.data(), targets.data(), N, Vi, Vi, nullptr));
  return CrossEntropyOut<FastHandler>{std::move(losses), std::move(probs)};
}

inline osprey::Result<void> FastHandler::crossEntropyRows(float* probs, float* losses, const float* logits,
                                                          const float* targets, osprey::Index N, int V, int ld,
                                                          __nv_bfloat16* halves) {
  const int cached = fast_kernels::crossEntropyCache(ld, m_device->sharedMemoryPerBlock());
  const std::size_t shared = static_cast<std::size_t>(cached) * sizeof(float4);
  OSPREY_CUDA_CHECK(cudaFuncSetAttribute(fast_kernels::crossEntropyForward,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)),
                    "fast cross-entropy: shared memory");
  fast_kernels::crossEntropyForward<<<fast_kernels::crossEntropyBlocks(N, m_device->multiprocessors()),
                                      fast_kernels::kLossThreads, shared, stream()>>>(probs, losses, logits, targets,
                                                                                      N, V, ld, halves, cached);
  return fast_detail::launched("fast cross-entropy launch");
}

inline osprey::Result<FastHandler::Buffer> FastHandler::crossEntropyBackward(const Buffer& probs,
                                                                             const Buffer& targets, osprey::Index N,
                                                                             osprey::Index V, osprey::Scalar dloss) {
  const int Vi = OSPREY_TRY(checkCrossEntropy("cross-entropy backward", probs, "probs", targets, N, V));
  auto dlogits = OSPREY_TRY(allocate(N * V));
  if (N > 0) {
    fast_kernels::crossEntropyBackward<<<static_cast<unsigned>(N), fast_kernels::kVocabThreads, 0, stream()>>>(
        dlogits.data(), probs.data(), targets.data(), N, Vi, static_cast<float>(dloss));
    OSPREY_CHECK(fast_detail::launched("fast cross-entropy backward launch"));
  }
  return dlogits;
}

inline osprey::Result<AdamWOut<FastHandler>> FastHandler::adamwUpdate(const Buffer& param, const Buffer& grad,
                                                                      const Buffer& m, const Buffer& v,
                                                                      osprey::Index t, osprey::Scalar lr,
                                                                      osprey::Scalar beta1, osprey::Scalar beta2,
                                                                      osprey::Scalar eps, osprey::Scalar weightDecay,
                                                                      bool decay) {
  auto one = OSPREY_TRY(adamwUpdates({param}, {grad}, {m}, {v}, t, lr, beta1, beta2, eps, weightDecay, {decay}));
  return std::move(one.front());
}

inline osprey::Result<std::vector<AdamWOut<FastHandler>>> FastHandler::adamwUpdates(
    const std::vector<Buffer>& params, const std::vector<Buffer>& grads, const std::vector<Buffer>& ms,
    const std::vector<Buffer>& vs, osprey::Index t, osprey::Scalar lr, osprey::Scalar beta1, osprey::Scalar beta2,
    osprey::Scalar eps, osprey::Scalar weightDecay, const std::vector<bool>& decay) {
  OSPREY_CHECK(detail::checkAdamWLists(params, grads, ms, vs, decay));
  for (std::size_t i = 0; i < params.size(); ++i)  // every tensor checked before any is allocated
    OSPREY_CHECK(detail::checkAdamW(*this, params[i], grads[i], ms[i], vs[i], t));
  const osprey::Scalar bc1 = 1.0 - osprey::math::powi(beta1, t), bc2 = 1.0 - osprey::math::powi(beta2, t);
  std::vector<AdamWOut<FastHandler>> out;
  std::vector<fast_kernels::AdamWBody> bodies;
  std::vector<osprey::Index> sizes;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const osprey::Index n = params[i].size();
    auto p2 = OSPREY_TRY(allocate(n)), m2 = OSPREY_TRY(allocate(n)), v2 = OSPREY_TRY(allocate(n));
    fast_kernels::AdamWBody body{p2.data(), m2.data(), v2.data(), params[i].data(), grads[i].data(), ms[i].data(),
                                 vs[i].data(), static_cast<float>(beta1), static_cast<float>(beta2),
                                 static_cast<float>(decay[i] ? 1.0 - lr * weightDecay : 1.0),
                                 static_cast<float>(-(lr / bc1)), static_cast<float>(osprey::math::sqrt(bc2)),
                                 static_cast<float>(eps)};
    // The weights are the next step's product operands: their twins are written by the launch below.
    OSPREY_CHECK(withTwin(p2, [&](__nv_bfloat16* twin) -> osprey::Result<void> {
      body.twin = twin;
      return {};
    }));
    bodies.push_back(body);
    sizes.push_back(n);
    out.push_back(AdamWOut<FastHandler>{std::move(p2), std::move(m2), std::move(v2)});
  }
  OSPREY_CUDA_CHECK(fast_kernels::adamwTensors(stream(), bodies, sizes), "fast adamw launch");
  return out;
}

inline osprey::Result<bool> FastHandler::anyNonFinite(const std::vector<Buffer>& tensors) {
  auto flag = OSPREY_TRY(allocate(1));
  OSPREY_CUDA_CHECK(cudaMemsetAsync(flag.data(), 0, sizeof(float), stream()), "fast non-finite check");
  std::vector<fast_kernels::NonFiniteBody> bodies;
  std::vector<osprey::Index> sizes;
  for (const Buffer& x : tensors)
    if (x.size() > 0) {
      bodies.push_back({x.data(), flag.data()});
      sizes.push_back(x.size());
    }
  OSPREY_CUDA_CHECK(fast_kernels::nonFiniteTensors(stream(), bodies, sizes), "fast non-finite check launch");
  return get(flag, 0) != 0.0;
}

template <class Body>
osprey::Result<void> FastHandler::byFours(cudaStream_t stream, int multiprocessors, const char* launch, Body body,
                                          osprey::Index n) {
  if (n == 0) return {};
  const bool fours = body.aligned();
  const osprey::Index threads = fours ? (n + 3) / 4 : n;
  const auto blocks = static_cast<unsigned>(
      std::min<osprey::Index>((threads + 255) / 256, 8 * osprey::Index{multiprocessors}));
  fast_kernels::byFoursKernel<<<blocks, 256, 0, stream>>>(body, n, fours);
  return fast_detail::launched(launch);
}

// GELU's output is only the fc projection's input, its gradient only the fc layer's dout: their
// floats are written when something reads them (twinOnly).
// Both read x (and the backward dout) as bf16 values where it is stored so (matmulGeluForward's
// fc, geluMatmulBackward's dx): the values its floats hold, in half the bytes (Bf16Twins::withElements).
inline osprey::Result<FastHandler::Buffer> FastHandler::geluForward(const Buffer& x) {
  const int multiprocessors = m_device->multiprocessors();
  return m_twins.withElements(x, [&]<class X>(fast_parts::Elements<X> xs) {
    return twinOnly(x.size(), [xs, n = x.size(), multiprocessors](cudaStream_t stream, float* floats,
                                                                   __nv_bfloat16* twin) {
      return byFours(stream, multiprocessors, "fast gelu launch",
                     fast_kernels::GeluForwardBody<X>{floats, xs.data, twin}, n);
    });
  });
}

inline osprey::Result<FastHandler::Buffer> FastHandler::geluBackward(const Buffer& dout, const Buffer& x) {
  OSPREY_CHECK(checkLength(*this, dout, x.size(), "gelu backward", "dout"));
  const int multiprocessors = m_device->multiprocessors();
  return m_twins.withElements(dout, [&]<class D>(fast_parts::Elements<D> douts) {
    return m_twins.withElements(x, [&]<class X>(fast_parts::Elements<X> xs) {
      return twinOnly(x.size(), [douts, xs, n = x.size(), multiprocessors](cudaStream_t stream, float* floats,
                                                                            __nv_bfloat16* twin) {
        return byFours(stream, multiprocessors, "fast gelu backward launch",
                       fast_kernels::GeluBackwardBody<X, D>{floats, douts.data, xs.data, twin}, n);
      });
    });
  });
}

inline osprey::Result<FastHandler::Buffer> FastHandler::geluBackwardSummed(const Buffer& dout, const Buffer& x,
                                                                          osprey::Index N, osprey::Index width) {
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, width, "gelu backward", "x"));
  OSPREY_CHECK(checkLength(*this, dout, x.size(), "gelu backward", "dout"));
  if (N == 0) return geluBackward(dout, x);
  const int widthInt = OSPREY_TRY(fast_detail::intWidth("gelu backward", width));
  // A few blocks a multiprocessor, each walking rows a grid apart: few partial sums to add. Four,
  // not five: bounded to 96 registers for five, the pipelined kernel ran no faster on the H200
  // (bench/cuda/NOTES.md), and the totals would add a quarter more partial rows, grouped
  // otherwise (other bits in the bias gradient).
  const auto blocks = static_cast<int>(std::min<osprey::Index>(N, 4 * osprey::Index{m_device->multiprocessors()}));
  const int multiprocessors = m_device->multiprocessors();
  bool fits = false;
  Buffer sums, partials;
  auto out = OSPREY_TRY(m_twins.withElements(dout, [&]<class D>(fast_parts::Elements<D> douts) {
    return m_twins.withElements(x, [&]<class X>(fast_parts::Elements<X> xs) -> osprey::Result<Buffer> {
      fits = fast_kernels::geluSumsFit(douts.data, xs.data, width);
      if (!fits) return geluBackward(dout, x);
      sums = OSPREY_TRY(allocate(width));
      partials = OSPREY_TRY(allocate(osprey::Index{blocks} * width));
      // The launch's first run (the twin, or the floats and the twin) sums the columns; a later
      // one (the deferred floats) writes the same values by GeluBackwardBody, without them.
      return twinOnly(x.size(), [douts, xs, N, widthInt, multiprocessors, blocks, partials = partials.data(),
                                 first = true](cudaStream_t stream, float* floats, __nv_bfloat16* twin) mutable {
        if (!std::exchange(first, false))
          return byFours(stream, multiprocessors, "fast gelu backward launch",
                         fast_kernels::GeluBackwardBody<X, D>{floats, douts.data, xs.data, twin}, N * widthInt);
        // Registers for the groups a thread takes (1 .. kSumGroupsFor, geluSumsFit), no more; no
        // kernel past kSumGroupsFor is made (geluSumsFit sends no such row).
        constexpr int most = fast_kernels::kSumGroupsFor<X, D>;
        const auto summed = [&](auto groups) {
          fast_kernels::geluBackwardSummed<X, D, decltype(groups)::value>
              <<<blocks, fast_kernels::kSumThreads, 0, stream>>>(floats, twin, partials, douts.data, xs.data, N,
                                                                 widthInt);
        };
        static_assert(fast_kernels::kSumGroups == 7, "a case for each count of groups");
        switch ((widthInt / 8 + fast_kernels::kSumThreads - 1) / fast_kernels::kSumThreads) {
          case 0:  // no columns: nothing to write
          case 1: summed(std::integral_constant<int, 1>{}); break;
          case 2: summed(std::integral_constant<int, 2>{}); break;
          case 3: summed(std::integral_constant<int, 3>{}); break;
          case 4: summed(std::integral_constant<int, 4>{}); break;
          case 5: summed(std::integral_constant<int, 5>{}); break;
          case 6: summed(std::integral_constant<int, std::min(6, most)>{}); break;
          default: summed(std::integral_constant<int, most>{}); break;
        }
        return fast_detail::launched("fast gelu backward with column sums launch");
      });
    });
  }));
  if (!fits) return out;
  OSPREY_CUDA_CHECK(fast_kernels::launchColumnTotals(stream(), fast_kernels::ColumnSets{{sums.data(), nullptr, nullptr}, widthInt},
                                                     partials.data(), blocks, 1),
                    "fast gelu backward: column totals launch");
  m_columnSums.keep(out, width, std::move(sums));
  return out;
}

}  // namespace gpt2
