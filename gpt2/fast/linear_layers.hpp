// The fast handler's linear layers: cuBLAS products that read their operands transposed in place,
// the bias in cuBLASLt's epilogue, and the lm head's V = 50257 padded to aligned rows. Each
// product reads bf16 twins of its operands or the floats (fast/product_choice.hpp).
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/linear_layers.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

namespace fast_detail {
// Whether an (N, width) operand is worth re-laying with rows padded to 16 bytes for cuBLAS.
inline bool padsRows(osprey::Index N, osprey::Index width) { return width % 4 != 0 && N >= 64 && width >= 1024; }
// Padded to a multiple of 64: rows 16-byte aligned for float and bf16 operands alike (bf16 at a
// multiple of 4 left cuBLAS on its 2-element-aligned kernels, 2.5× slower), and whole tiles.
inline osprey::Index paddedWidth(osprey::Index width) { return (width + 63) / 64 * 64; }
// Element i of an (N, OC) output: the bias of its column.
struct BiasOfColumn {
  osprey::ViewOf<float> bias;
  osprey::Int columns;
  OSPREY_FN osprey::Scalar operator()(osprey::Index i) const { return bias[osprey::Int(i) % columns]; }
};
// The same onto an addend of the output's shape: addend[i] + bias of i's column.
struct AddendPlusBias {
  osprey::ViewOf<float> addend, bias;
  osprey::Int columns;
  OSPREY_FN osprey::Scalar operator()(osprey::Index i) const {
    return addend[i] + bias[osprey::Int(i) % columns];
  }
};
struct One {
  OSPREY_FN osprey::Scalar operator()(osprey::Index) const { return 1.0; }
};
}  // namespace fast_detail

inline osprey::Result<void> FastHandler::checkMatmul(const Buffer& x, const Buffer& w, const Buffer& bias,
                                                     osprey::Index N, osprey::Index IC, osprey::Index OC) {
  const char* L = "matmul";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, IC, OC, L, "weight"));
  return fast_detail::checkShape(*this, bias, 1, OC, L, "bias");
}

inline osprey::Result<FastHandler::Buffer> FastHandler::matmulForward(const Buffer& x, const Buffer& w,
                                                                      const Buffer& bias, osprey::Index N,
                                                                      osprey::Index IC, osprey::Index OC) {
  OSPREY_CHECK(checkMatmul(x, w, bias, N, IC, OC));
  return m_products.by([&]<class E>(E) -> osprey::Result<Buffer> {
    const auto xs = OSPREY_TRY(operandOf<E>(x)), ws = OSPREY_TRY(operandOf<E>(w));
    return linearProduct<E>({xs.data}, {ws.data}, bias, N, IC, OC);
  });
}

inline osprey::Result<FastHandler::Buffer> FastHandler::residualMatmulForward(const Buffer& x, const Buffer& in,
                                                                              const Buffer& w, const Buffer& bias,
                                                                              osprey::Index N, osprey::Index IC,
                                                                              osprey::Index OC) {
  const char* L = "residual matmul";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, OC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, in, N, IC, L, "in"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, IC, OC, L, "weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, bias, 1, OC, L, "bias"));
  return m_products.by([&]<class E>(E) -> osprey::Result<Buffer> {
    const auto ins = OSPREY_TRY(operandOf<E>(in)), ws = OSPREY_TRY(operandOf<E>(w));
    return linearProduct<E>({ins.data}, {ws.data}, bias, N, IC, OC, &x);
  });
}

inline osprey::Result<std::optional<FastHandler::Buffer>> FastHandler::halfProduct(const Buffer& x, const Buffer& w,
                                                                                  const Buffer& bias, osprey::Index N,
                                                                                  osprey::Index IC, osprey::Index OC) {
  OSPREY_CHECK(checkMatmul(x, w, bias, N, IC, OC));
  const osprey::Index n = OSPREY_TRY(checkedProduct("matmul", {N, OC}));
  if (n == 0 || IC == 0) return std::optional<Buffer>{};
  const auto xs = OSPREY_TRY(operandOf<__nv_bfloat16>(x)), ws = OSPREY_TRY(operandOf<__nv_bfloat16>(w));
  const __nv_bfloat16* halfBias = OSPREY_TRY(m_twins.of(bias, bias.size()));
  return storedProduct(n, [&](__nv_bfloat16* twin) {
    return productPlusBiasToHalves(twin, {xs.data}, {ws.data}, N, IC, OC, halfBias);
  });
}

inline osprey::Result<ProjectedGeluOut<FastHandler>> FastHandler::matmulGeluForward(const Buffer& x, const Buffer& w,
                                                                                    const Buffer& bias, osprey::Index N,
                                                                                    osprey::Index IC, osprey::Index OC) {
  ProjectedGeluOut<FastHandler> o;
  std::optional<Buffer> fc;
  if (storesHalves()) fc = OSPREY_TRY(halfProduct(x, w, bias, N, IC, OC));
  o.fc = fc ? std::move(*fc) : OSPREY_TRY(matmulForward(x, w, bias, N, IC, OC));
  o.gelu = OSPREY_TRY(geluForward(o.fc));  // from fc's bf16 values where it is stored so
  return o;
}

template <class Then, class Row>
osprey::Result<FastHandler::Buffer> FastHandler::oneRow(const Buffer& x, const Buffer& wT, const float* bias,
                                                        osprey::Index IC, osprey::Index OC, Then then, Row row) {
  const int ic = OSPREY_TRY(fast_detail::intWidth("linear", IC)), oc = OSPREY_TRY(fast_detail::intWidth("linear", OC));
  constexpr bool normalises = std::is_same_v<Row, fast_kernels::RowNormalised>;
  static_assert(kMaxNormalisedRow == fast_shapes::kMaxNormalisedRow, "the rows shape_support.hpp says fit");
  if (normalises)
    if (auto problem = fast_shapes::normalisedRowProblem(IC)) return osprey::Error{*problem};
  auto y = OSPREY_TRY(allocate(OC));
  const std::size_t shared = normalises ? static_cast<std::size_t>(IC) * sizeof(float) : 0;
  const auto launch = [&](const auto* weights) {
    using W = std::remove_cv_t<std::remove_pointer_t<decltype(weights)>>;
    const int split = fast_kernels::rowSplit(static_cast<long long>(ic) * sizeof(W), oc);
    const int rowsPerBlock = fast_kernels::kRowWarpsPerBlock / split;
    const auto kernel = fast_kernels::linearRow<Then, Row, W>;
    // At most as many blocks as the multiprocessors hold at once; a longer product's blocks take
    // several turns of rows.
    int resident = 0;
    const cudaError_t asked = m_occupancy.residentBlocks(&resident, kernel, fast_kernels::kRowWarpsPerBlock * 32, shared);
    if (asked != cudaSuccess) return asked;
    const auto blocks = static_cast<unsigned>(std::min<osprey::Index>(
        (OC + rowsPerBlock - 1) / rowsPerBlock, std::max(resident, 1) * osprey::Index{m_device->multiprocessors()}));
    return fast_kernels::launchOverlapped(blocks, fast_kernels::kRowWarpsPerBlock * 32, shared, stream(), kernel,
                                          y.data(), weights, x.data(), bias, ic, oc, split, then, row);
  };
  const __nv_bfloat16* half = halfOf(wT);
  OSPREY_CUDA_CHECK(half ? launch(half) : launch(wT.data()), "fast one-row linear launch");
  return y;
}

inline osprey::Result<FastHandler::Buffer> FastHandler::matmulForwardTransposed(const Buffer& x, const Buffer& wt,
                                                                                osprey::Index N, osprey::Index IC,
                                                                                osprey::Index OC) {
  const char* L = "matmul (transposed weight)";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wt, OC, IC, L, "weight"));
  if (N == 1) return oneRow(x, wt, nullptr, IC, OC, fast_kernels::Biased{});  // the lm head while decoding
  auto out = OSPREY_TRY(allocate(OSPREY_TRY(checkedProduct(L, {N, OC}))));
  if (!fast_detail::padsRows(N, OC)) {
    OSPREY_CHECK(m_products.by([&]<class E>(E) -> osprey::Result<void> {
      const auto xs = OSPREY_TRY(operandOf<E>(x)), ws = OSPREY_TRY(operandOf<E>(wt));
      return product(out.data(), osprey::OperandOf<E>{xs.data}, osprey::OperandOf<E>{ws.data, true}, N, IC, OC);
    }));
    return out;
  }
  // OC not a multiple of 4 (the lm head's V = 50257) keeps cuBLAS on its slow unaligned kernels,
  // through the rows of the output and through OC itself: the product runs over wt padded with
  // zero rows to a multiple of 4, into rows that wide, and is then packed.
  auto wide = OSPREY_TRY(paddedTransposedProduct(x, wt, N, IC, OC));
  OSPREY_CHECK(copyRows(out.data(), OC, wide.data(), fast_detail::paddedWidth(OC), N, OC));
  return out;
}

inline osprey::Result<FastHandler::Buffer> FastHandler::paddedTransposedProduct(const Buffer& x, const Buffer& wt,
                                                                                osprey::Index N, osprey::Index IC,
                                                                                osprey::Index OC) {
  const osprey::Index padded = fast_detail::paddedWidth(OC);
  auto wide = OSPREY_TRY(allocate(N * padded));
  OSPREY_CHECK(m_products.by([&]<class E>(E) -> osprey::Result<void> {
    const auto xs = OSPREY_TRY(operandOf<E>(x)), wtWide = OSPREY_TRY(operandOf<E>(wt, padded * IC));
    return product(wide.data(), osprey::OperandOf<E>{xs.data}, osprey::OperandOf<E>{wtWide.data, true}, N, IC, padded,
                   0.0f, 1, osprey::Precision::TensorCores, padded);
  }));
  return wide;
}

inline osprey::Result<MatmulGrads<FastHandler>> FastHandler::matmulBackward(const Buffer& dout, const Buffer& x,
                                                                            const Buffer& w, osprey::Index N,
                                                                            osprey::Index IC, osprey::Index OC) {
  return matmulGradients(dout, x, w, N, IC, OC, false);
}

inline osprey::Result<GeluMatmulGrads<FastHandler>> FastHandler::geluMatmulBackward(const Buffer& dout,
                                                                                    const Buffer& g, const Buffer& w,
                                                                                    const Buffer& f, osprey::Index N,
                                                                                    osprey::Index IC,
                                                                                    osprey::Index OC) {
  auto grads = OSPREY_TRY(matmulGradients(dout, g, w, N, IC, OC, storesHalves()));
  // From dx's bf16 values where it is stored so, and f's where it is; with dfc's column sums, the
  // fc layer's bias gradient.
  auto dfc = OSPREY_TRY(geluBackwardSummed(grads.dx, f, N, IC));
  return GeluMatmulGrads<FastHandler>{std::move(dfc), std::move(grads.dw), std::move(grads.dbias)};
}

inline osprey::Result<MatmulGrads<FastHandler>> FastHandler::matmulGradients(const Buffer& dout, const Buffer& x,
                                                                             const Buffer& w, osprey::Index N,
                                                                             osprey::Index IC, osprey::Index OC,
                                                                             bool dxStored) {
  const char* L = "matmul backward";
  OSPREY_CHECK(fast_detail::checkShape(*this, dout, N, OC, L, "dout"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, IC, OC, L, "weight"));
  Buffer dx, dbias;
  auto dw = OSPREY_TRY(allocate(IC * OC));
  // dbias = 1ᵀ · dout: the sums dout's producer kept as it wrote dout (column_sums.hpp: float sums
  // of its float values, and no pass over dout for them), else summed after the products below.
  const Buffer* producerSums = m_columnSums.take(dout, OC);
  if (producerSums) dbias = *producerSums;
  OSPREY_CHECK(m_products.by([&]<class E>(E) -> osprey::Result<void> {
    using Op = osprey::OperandOf<E>;
    const auto d = OSPREY_TRY(operandOf<E>(dout)), xs = OSPREY_TRY(operandOf<E>(x)), ws = OSPREY_TRY(operandOf<E>(w));
    std::optional<Buffer> stored;  // dx as bf16 (bf16 products only)
    if constexpr (std::is_same_v<E, __nv_bfloat16>)
      if (dxStored && N > 0 && IC > 0 && OC > 0)
        stored = OSPREY_TRY(storedProduct(N * IC, [&](__nv_bfloat16* twin) {
          return productToHalves(twin, Op{d.data}, Op{ws.data, true}, N, OC, IC);
        }));
    if (stored) {
      dx = std::move(*stored);
    } else {
      dx = OSPREY_TRY(allocate(N * IC));
      OSPREY_CHECK(product(dx.data(), Op{d.data}, Op{ws.data, true}, N, OC, IC));  // (N, OC) · wᵀ
    }
    return product(dw.data(), Op{xs.data, true}, Op{d.data}, IC, N, OC);          // xᵀ · (N, OC)
  }));
  // Else float sums of dout's floats: not cuBLASLt's bias-gradient epilogue, whose sums of the bf16
  // values dw's product reads fall outside the bf16 bound on wide layers (bench/RESULTS.md,
  // 2026-12-06); no GPT-2 layer's dout comes without its producer's sums.
  if (!producerSums) {
    dbias = OSPREY_TRY(allocate(OC));
    OSPREY_CHECK(product(dbias.data(), {OSPREY_TRY(ones(N))}, {dout.data()}, 1, N, OC, 0.0f, 1,
                         osprey::Precision::Float));
  }
  return MatmulGrads<FastHandler>{std::move(dx), std::move(dw), std::move(dbias)};
}

inline osprey::Result<MatmulTransposedGrads<FastHandler>> FastHandler::matmulBackwardTransposed(
    const Buffer& dout, const Buffer& x, const Buffer& wt, osprey::Index N, osprey::Index IC, osprey::Index OC) {
  const char* L = "matmul (transposed weight) backward";
  OSPREY_CHECK(fast_detail::checkShape(*this, dout, N, OC, L, "dout"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wt, OC, IC, L, "weight"));
  if (!fast_detail::padsRows(N, OC)) {
    auto dx = OSPREY_TRY(allocate(N * IC)), dwt = OSPREY_TRY(allocate(OC * IC));
    OSPREY_CHECK(m_products.by([&]<class E>(E) -> osprey::Result<void> {
      using Op = osprey::OperandOf<E>;
      const auto d = OSPREY_TRY(operandOf<E>(dout)), xs = OSPREY_TRY(operandOf<E>(x)), ws = OSPREY_TRY(operandOf<E>(wt));
      OSPREY_CHECK(product(dx.data(), Op{d.data}, Op{ws.data}, N, OC, IC));         // (N, OC) · wt
      return product(dwt.data(), Op{d.data, true}, Op{xs.data}, OC, N, IC);        // doutᵀ · x
    }));
    return MatmulTransposedGrads<FastHandler>{std::move(dx), std::move(dwt)};
  }
  // OC not a multiple of 4 (the lm head's V) keeps cuBLAS on unaligned kernels, whether OC is the
  // inner dimension (dx) or the output's rows (dwt): both products run over OC padded to Vp with
  // zeros (dout's extra columns, wt's extra rows), which adds nothing.
  const osprey::Index Vp = fast_detail::paddedWidth(OC);
  auto doutWide = OSPREY_TRY(allocate(N * Vp));
  OSPREY_CHECK(copyRows(doutWide.data(), Vp, dout.data(), OC, N, OC, Vp));
  return paddedTransposedGrads(doutWide, x, wt, N, IC, OC);
}

inline osprey::Result<MatmulTransposedGrads<FastHandler>> FastHandler::paddedTransposedGrads(
    const Buffer& doutWide, const Buffer& x, const Buffer& wt, osprey::Index N, osprey::Index IC, osprey::Index OC,
    const __nv_bfloat16* halves) {
  const osprey::Index Vp = fast_detail::paddedWidth(OC);
  auto dx = OSPREY_TRY(allocate(N * IC)), dwtWide = OSPREY_TRY(allocate(Vp * IC));
  OSPREY_CHECK(m_products.by([&]<class E>(E) -> osprey::Result<void> {
    using Op = osprey::OperandOf<E>;
    Held<E> d{};
    if constexpr (std::is_same_v<E, __nv_bfloat16>) d.data = halves;
    if (!d.data) d = OSPREY_TRY(operandOf<E>(doutWide));
    const auto xs = OSPREY_TRY(operandOf<E>(x)), wtWide = OSPREY_TRY(operandOf<E>(wt, Vp * IC));
    OSPREY_CHECK(product(dx.data(), Op{d.data}, Op{wtWide.data}, N, Vp, IC));            // (N, Vp) · wt (Vp, IC)
    return product(dwtWide.data(), Op{d.data, true}, Op{xs.data}, Vp, N, IC);           // doutᵀ · x, (Vp, IC)
  }));
  return MatmulTransposedGrads<FastHandler>{std::move(dx), dwtWide.prefix(OC * IC)};
}


inline osprey::Result<void> FastHandler::copyRows(float* dst, osprey::Index ldDst, const float* src,
                                                 osprey::Index ldSrc, osprey::Index rows, osprey::Index cols,
                                                 osprey::Index width) {
  if (rows == 0 || cols == 0) return {};
  const int c = OSPREY_TRY(fast_detail::intWidth("copy rows", cols));
  const int w = width > cols ? OSPREY_TRY(fast_detail::intWidth("copy rows", width)) : c;
  fast_kernels::copyRows<<<fast_kernels::copyGrid(rows, w), fast_kernels::kCopyThreads, 0, stream()>>>(dst, ldDst, src, ldSrc, rows,
                                                                                         c, w);
  return fast_detail::launched("fast row copy launch");
}

template <class E>
osprey::Result<FastHandler::Buffer> FastHandler::linearProduct(osprey::OperandOf<E> x, osprey::OperandOf<E> w,
                                                               const Buffer& bias, osprey::Index N, osprey::Index IC,
                                                               osprey::Index OC, const Buffer* addend) {
  auto out = OSPREY_TRY(allocate(OSPREY_TRY(checkedProduct("linear", {N, OC}))));
  if (N == 0 || OC == 0) return out;
  if (IC > 0 && OSPREY_TRY(productPlusBias(out.data(), x, w, N, IC, OC, bias.data(), addend ? addend->data() : nullptr)))
    return out;
  out = addend ? OSPREY_TRY(build(N * OC, fast_detail::AddendPlusBias{addend->view(), bias.view(), OC}))
               : OSPREY_TRY(build(N * OC, fast_detail::BiasOfColumn{bias.view(), OC}));
  OSPREY_CHECK(product(out.data(), x, w, N, IC, OC, 1.0f));
  return out;
}


inline osprey::Result<const float*> FastHandler::ones(osprey::Index n) {
  if (m_ones.size() < n)
    m_ones = OSPREY_TRY(build(n, fast_detail::One{}));
  return static_cast<const float*>(m_ones.data());
}

}  // namespace gpt2
