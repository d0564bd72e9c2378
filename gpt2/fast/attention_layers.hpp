// The fast handler's attention. At head size 64 (GPT-2's), flash attention (fast/flash_attention.hpp):
// the (T, T) scores are never stored, and att holds the output and each softmax row's log-sum-exp
// instead of the probabilities (fast_shapes::flashSaved); its products read the handler's kind of
// operand (bf16 or TF32, fast/product_choice.hpp). Other head sizes (TF32 either way): per-head
// products read in place (strided, or over an address table), around the fused float causal
// softmax of fast/causal_softmax.hpp.
// A part of gpt2/fast/fast_handler.hpp, which includes it after the class: include that header.
#pragma once

#if !defined(OSPREY_GPT2_FAST_HANDLER_PARTS)
#error "gpt2/fast/attention_layers.hpp is a part of gpt2/fast/fast_handler.hpp: include that header"
#endif

namespace gpt2 {

// The flash kernels' operand kind for the linear layers' element type.
template <class E>
using FlashTiles = std::conditional_t<std::is_same_v<E, float>, fast_kernels::Tf32Tiles, fast_kernels::Bf16Tiles>;

// What the flash kernels read tiles of: the floats, and with bf16 tiles the buffer's bf16 twin
// (copied into shared memory as it is, asynchronously; qkv's is made once for the forward and
// its backward).
template <class E>
osprey::Result<fast_kernels::TileSource> FastHandler::tilesOf(const Buffer& b) {
  if constexpr (std::is_same_v<E, float>) return fast_kernels::TileSource{b.data(), nullptr};
  else return fast_kernels::TileSource{b.address(), OSPREY_TRY(m_twins.of(b, b.size()))};  // the twin alone
}

namespace fast_detail {
// How cuBLAS reads the (rows, cols) blocks of a strided source in place: one of the two strides
// must be 1 (the block, or its transpose, has contiguous rows), and every address must lie in the
// source. `batch` is where the next batch's heads start; heads of one batch are headStride apart.
struct PlacedOperand {
  osprey::Operand operand;
  osprey::Index batch;
};
inline std::optional<PlacedOperand> inPlace(const FastHandler::Buffer& src, const heads::Blocks& b,
                                            osprey::Index heads, osprey::Index rows, osprey::Index cols) {
  const osprey::Index rs = b.rowStride.raw(), cs = b.colStride.raw(), NH = b.NH.raw();
  const osprey::Index batches = NH > 0 ? heads / NH : 0;
  if (NH <= 0 || heads % NH != 0 || rows < 1 || cols < 1 || (cs != 1 && rs != 1)) return std::nullopt;
  for (osprey::Index v : {rs, cs, b.headStride.raw(), b.batchStride.raw(), b.offset.raw()})
    if (v < 0) return std::nullopt;
  // The last element of the last head, computed without overflow: every term is below 2^62.
  const long double last = static_cast<long double>(batches - 1) * b.batchStride.raw() +
                           static_cast<long double>(NH - 1) * b.headStride.raw() + b.offset.raw() +
                           static_cast<long double>(rows - 1) * rs + static_cast<long double>(cols - 1) * cs;
  if (last >= static_cast<long double>(src.size())) return std::nullopt;
  const bool transposed = cs != 1;
  return PlacedOperand{{src.data() + b.offset.raw(), transposed, transposed ? cs : rs, b.headStride.raw()},
                       b.batchStride.raw()};
}
}  // namespace fast_detail

namespace fast_detail {
// Where head bh = b·NH + hh of one operand starts: base + b·batch + hh·head.
struct HeadPlaces {
  const float* base;
  osprey::Index batch, head;
  OSPREY_FN const float* at(osprey::Index bh, osprey::Index NH) const { return base + (bh / NH) * batch + (bh % NH) * head; }
};
// The address table of headProductsInto: `count` left operands, then as many right operands,
// then as many outputs.
struct HeadAddresses {
  const float** table;
  osprey::Index count, NH;
  HeadPlaces left, right, out;
  OSPREY_FN void operator()(osprey::Index bh) const {
    table[bh] = left.at(bh, NH);
    table[count + bh] = right.at(bh, NH);
    table[2 * count + bh] = out.at(bh, NH);
  }
};
}  // namespace fast_detail

inline osprey::Result<void> FastHandler::headProductsInto(HeadOutput out, osprey::Index heads, osprey::Index rows,
                                                         osprey::Index inner, osprey::Index cols, const Buffer& leftSrc,
                                                         heads::Blocks left, const Buffer& rightSrc,
                                                         heads::Blocks right) {
  if (heads == 0 || rows == 0 || cols == 0) return {};
  // Heads come in batches of NH, (b, hh) order. Operands cuBLAS cannot read in place are gathered
  // as the reference gathers them, (heads, r, c).
  const osprey::Index NH = left.NH.raw() > 0 && left.NH.raw() == right.NH.raw() && heads % left.NH.raw() == 0
                               ? left.NH.raw()
                               : heads;
  Buffer gatheredLeft, gatheredRight;
  auto placed = [&](const Buffer& src, const heads::Blocks& b, osprey::Index r, osprey::Index c,
                    Buffer& gathered) -> osprey::Result<fast_detail::PlacedOperand> {
    if (NH == b.NH.raw())
      if (auto p = fast_detail::inPlace(src, b, heads, r, c)) return *p;
    gathered = OSPREY_TRY(heads::gatherAll(*this, src, b, heads, r, c));
    return fast_detail::PlacedOperand{{gathered.data(), false, 0, r * c}, NH * r * c};
  };
  const auto a = OSPREY_TRY(placed(leftSrc, left, rows, inner, gatheredLeft));
  const auto b = OSPREY_TRY(placed(rightSrc, right, inner, cols, gatheredRight));
  // One strided batched product when every operand and the output are evenly spaced across the
  // batches; otherwise one batched product over arrays of each head's addresses.
  const bool even = a.batch == NH * a.operand.stride && b.batch == NH * b.operand.stride &&
                    out.batchStride == NH * out.headStride;
  if (even)
    return product(out.data, a.operand, b.operand, rows, inner, cols, 0.0f, heads, osprey::Precision::TensorCores, out.ld,
                   out.headStride);
  auto* device = runtime().get();
  const float** table = OSPREY_TRY(device->allocate<const float*>(3 * heads));
  const std::shared_ptr<void> held(table, [device](void* p) { device->release(p); });
  OSPREY_CHECK(device->forEach(heads, fast_detail::HeadAddresses{table, heads, NH,
                                                                 {a.operand.data, a.batch, a.operand.stride},
                                                                 {b.operand.data, b.batch, b.operand.stride},
                                                                 {out.data, out.batchStride, out.headStride}}));
  return productsAt(const_cast<float* const*>(table + 2 * heads), out.ld, table, a.operand.transposed,
                    a.operand.leading(rows, inner), table + heads, b.operand.transposed, b.operand.leading(inner, cols), rows,
                    inner, cols, heads);
}

inline osprey::Result<FastHandler::Buffer> FastHandler::headProducts(osprey::Index heads, osprey::Index rows,
                                                                     osprey::Index inner, osprey::Index cols,
                                                                     const Buffer& leftSrc, heads::Blocks left,
                                                                     const Buffer& rightSrc, heads::Blocks right) {
  const osprey::Index block = OSPREY_TRY(checkedProduct("attention heads", {rows, cols}));
  auto out = OSPREY_TRY(allocate(OSPREY_TRY(checkedProduct("attention heads", {heads, block}))));
  const osprey::Index NH = left.NH.raw() > 0 ? left.NH.raw() : 1;
  OSPREY_CHECK(headProductsInto({out.data(), cols, block, NH * block}, heads, rows, inner, cols, leftSrc, left,
                                rightSrc, right));
  return out;
}

inline osprey::Result<AttentionOut<FastHandler>> FastHandler::attentionForward(const Buffer& qkv, osprey::Index B,
                                                                               osprey::Index T, osprey::Index C,
                                                                               osprey::Index NH) {
  const char* L = "attention";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  OSPREY_CHECK(checkLength(*this, qkv, OSPREY_TRY(checkedProduct(L, {B, T, 3, C})), L, "qkv"));
  const osprey::Index BH = OSPREY_TRY(checkedProduct(L, {B, NH})), R = OSPREY_TRY(checkedProduct(L, {BH, T}));
  const osprey::Index BTC = OSPREY_TRY(checkedProduct(L, {B, T, C}));
  if (fast_kernels::flashFits(B, C, NH)) {
    // Flash attention: att holds what its backward reads instead of the probabilities, a copy of
    // out (B, T, C) and each softmax row's log-sum-exp (B, NH, T), laid out as
    // fast_shapes::flashSaved says (out first, on the allocation's 256 bytes); the kernel writes
    // out's floats there (and out's bf16 twin, the projection's operand, with bf16 products).
    // out is that copy itself, a part of att's block: the kernel writes the floats once.
    const fast_shapes::FlashSaved layout = fast_shapes::flashSaved(B, T, C, NH);
    if (auto problem = fast_shapes::flashSavedProblem(layout)) return osprey::Error{*problem};
    auto saved = OSPREY_TRY(allocate(layout.size));
    const Buffer out = saved.part(layout.out, BTC);
    float* lse = saved.data() + layout.lse;
    OSPREY_CHECK(withTwin(out, [&](__nv_bfloat16* twin) {
      return m_products.by([&]<class E>(E) -> osprey::Result<void> {
        const auto tiles = OSPREY_TRY(tilesOf<E>(qkv));
        const fast_kernels::OutputPlaces places{nullptr, out.data(), twin};
        // bf16 tiles on an H100/H200: the warpgroup kernel (fast/flash_forward_wgmma.hpp).
        if (std::is_same_v<E, __nv_bfloat16> && fast_kernels::wgmmaReady())
          return fast_kernels::flashAttentionForwardWgmma(stream(), tiles, places, lse, B, T, C, NH);
        return fast_kernels::flashAttentionForward<FlashTiles<E>>(stream(), tiles, places, lse, B, T, C, NH);
      });
    }));
    return AttentionOut<FastHandler>{out, std::move(saved)};
  }
  const heads::Layout qkvHeads{T, 3 * C, NH, hs};
  // scores (B, NH, T, T) = q · kᵀ per head, then att in place.
  auto att = OSPREY_TRY(headProducts(BH, T, hs, T, qkv, qkvHeads.rows(0), qkv, qkvHeads.transposed(C)));
  OSPREY_CHECK(fast_kernels::causalSoftmax(stream(), att.data(), R, T, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)))));
  // out (B, T, C): head hh of batch b writes columns [hh·hs, (hh+1)·hs) of rows b·T ...
  auto out = OSPREY_TRY(allocate(BTC));
  OSPREY_CHECK(headProductsInto({out.data(), C, hs, T * C}, BH, T, T, hs, att, heads::squareRows(NH, T), qkv,
                                qkvHeads.rows(2 * C)));
  return AttentionOut<FastHandler>{std::move(out), std::move(att)};
}

inline osprey::Result<ProjectedAttentionOut<FastHandler>> FastHandler::matmulAttentionForward(
    const Buffer& x, const Buffer& w, const Buffer& bias, osprey::Index B, osprey::Index T, osprey::Index C,
    osprey::Index NH) {
  const char* L = "attention input";
  const osprey::Index N = OSPREY_TRY(checkedProduct(L, {B, T})), OC = OSPREY_TRY(checkedProduct(L, {3, C}));
  const auto twoLayers = [&]() -> osprey::Result<ProjectedAttentionOut<FastHandler>> {
    ProjectedAttentionOut<FastHandler> o;
    o.qkv = OSPREY_TRY(matmulForward(x, w, bias, N, C, OC));
    o.attn = OSPREY_TRY(attentionForward(o.qkv, B, T, C, NH));
    return o;
  };
  if (!storesHalves() || N == 0 || !fast_kernels::flashFits(B, C, NH)) return twoLayers();
  auto qkv = OSPREY_TRY(halfProduct(x, w, bias, N, C, OC));
  if (!qkv) return twoLayers();  // cuBLASLt has no bf16-output algorithm for the shape
  ProjectedAttentionOut<FastHandler> o;
  o.attn = OSPREY_TRY(attentionForward(*qkv, B, T, C, NH));  // its tiles from the twin
  o.qkv = std::move(*qkv);
  return o;
}

inline osprey::Result<FastHandler::Buffer> FastHandler::attentionBackward(const Buffer& dout, const Buffer& qkv,
                                                                          const Buffer& att, osprey::Index B,
                                                                          osprey::Index T, osprey::Index C,
                                                                          osprey::Index NH) {
  const char* L = "attention backward";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  const osprey::Index BTC = OSPREY_TRY(checkedProduct(L, {B, T, C}));
  OSPREY_CHECK(checkLength(*this, dout, BTC, L, "dout"));
  const osprey::Index n3 = OSPREY_TRY(checkedProduct(L, {B, T, 3, C}));
  OSPREY_CHECK(checkLength(*this, qkv, n3, L, "qkv"));
  const osprey::Index BH = OSPREY_TRY(checkedProduct(L, {B, NH})), R = OSPREY_TRY(checkedProduct(L, {BH, T}));
  if (fast_kernels::flashFits(B, C, NH)) {
    // att is attentionForward's flash state (fast_shapes::flashSaved): out (B, T, C), then the
    // log-sum-exps (R).
    const fast_shapes::FlashSaved layout = fast_shapes::flashSaved(B, T, C, NH);
    if (att.size() != layout.size)
      return osprey::Error{fmt::format("{}: att holds {} values, where this handler's attention forward keeps {} "
                                       "(the output, then each softmax row's log-sum-exp)",
                                       L, att.size(), layout.size)};
    if (auto problem = fast_shapes::flashSavedProblem(layout)) return osprey::Error{*problem};
    const float* savedOut = att.data() + layout.out;
    const float* lse = att.data() + layout.lse;
    auto rowDot = OSPREY_TRY(allocate(R));
    // Drow reads dout whole; with bf16 tiles it writes dout's twin as it goes, unless one is made.
    const auto rowDots = [&](__nv_bfloat16* doutTwin) {
      return fast_kernels::flashRowDotsOf(stream(), dout.data(), savedOut, rowDot.data(), doutTwin, B, T, C, NH);
    };
    if (m_products.bf16() && !m_twins.made(dout, dout.size()))
      (void)OSPREY_TRY(m_twins.add(dout, dout.size(), rowDots));
    else
      OSPREY_CHECK(rowDots(nullptr));
    // dqkv is only the qkv layer's dout: its floats are made when something reads them
    // (twinOnly), by the two kernels again from the same tiles (the launch holds every operand,
    // and the twins it reads tiles of). Its column sums, the qkv layer's bias gradient, are the
    // first run's: each warp sums the rows it writes (fast_kernels::warpSums), then columnTotals.
    const osprey::Index sumRows = fast_kernels::warpSumRows(B, T);
    if (sumRows > INT_MAX) return osprey::Error{fmt::format("{}: {} rows of column sums exceed a kernel's int", L, sumRows)};
    auto partials = OSPREY_TRY(allocate(OSPREY_TRY(checkedProduct(L, {sumRows, 3 * C}))));
    auto sums = OSPREY_TRY(allocate(3 * C));
    auto dqkv = OSPREY_TRY(m_products.by([&]<class E>(E) -> osprey::Result<Buffer> {
      const auto doutTiles = OSPREY_TRY(tilesOf<E>(dout)), qkvTiles = OSPREY_TRY(tilesOf<E>(qkv));
      const std::array<Buffer, 4> held{dout, qkv, att, rowDot};  // (att holds lse's memory)
      const std::array<fast_parts::HalfBuffer, 2> twins{m_twins.kept(dout), m_twins.kept(qkv)};
      // With bf16 tiles, ds goes from the keys kernel to dq's through a scratch of the launch's own;
      // on an H100/H200 the keys kernel is the warpgroup one (fast/flash_backward_wgmma.hpp).
      const bool warpgroups = std::is_same_v<E, __nv_bfloat16> && fast_kernels::wgmmaReady();
      return twinOnly(n3, [doutTiles, qkvTiles, held, twins, lse, B, T, C, NH, warpgroups, device = m_device,
                           warpSums = partials.data()](cudaStream_t stream, float* floats,
                                                       __nv_bfloat16* twin) mutable -> osprey::Result<void> {
        osprey::GpuBuffer<osprey::CudaDevice, std::uint32_t> dsT;
        if constexpr (std::is_same_v<E, __nv_bfloat16>) {
          const osprey::Index words = fast_kernels::flashDsWords(B, T, NH);
          dsT = {device, OSPREY_TRY(device->template allocate<std::uint32_t>(words)), words};
        }
        const fast_kernels::OutputPlaces out{floats, nullptr, twin, std::exchange(warpSums, nullptr)};
        if (warpgroups)
          return fast_kernels::flashAttentionBackwardWgmma(stream, doutTiles, qkvTiles, lse, held[3].data(), out, B, T,
                                                           C, NH, dsT.data());
        return fast_kernels::flashAttentionBackward<FlashTiles<E>>(stream, doutTiles, qkvTiles, lse, held[3].data(),
                                                                   out, B, T, C, NH, dsT.data());
      });
    }));
    if (sumRows > 0) {
      OSPREY_CUDA_CHECK(fast_kernels::launchColumnTotals(
                            stream(), fast_kernels::ColumnSets{{sums.data(), nullptr, nullptr}, static_cast<int>(3 * C)},
                            partials.data(), static_cast<int>(sumRows), 1),
                        "fast attention backward: column totals launch");
      m_columnSums.keep(dqkv, 3 * C, std::move(sums));
    }
    return dqkv;
  }
  OSPREY_CHECK(checkLength(*this, att, OSPREY_TRY(checkedProduct(L, {R, T})), L, "att"));
  const heads::Layout qkvHeads{T, 3 * C, NH, hs}, doutHeads{T, C, NH, hs};
  const heads::Blocks rows = heads::squareRows(NH, T), columns = heads::squareColumns(NH, T);
  // datt = dout · vᵀ, then in place the gradient of the unscaled scores.
  auto dscore = OSPREY_TRY(headProducts(BH, T, hs, T, dout, doutHeads.rows(0), qkv, qkvHeads.transposed(2 * C)));
  OSPREY_CHECK(fast_kernels::causalSoftmaxGradient(stream(), dscore.data(), att.data(), R, T,
                                                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)))));
  // dqkv (B, T, 3C): dq = dscore · k, dk = dscoreᵀ · q, dv = attᵀ · dout, each into its section.
  auto dqkv = OSPREY_TRY(allocate(n3));
  const auto section = [&](osprey::Index s) { return HeadOutput{dqkv.data() + s * C, 3 * C, hs, T * 3 * C}; };
  OSPREY_CHECK(headProductsInto(section(0), BH, T, T, hs, dscore, rows, qkv, qkvHeads.rows(C)));
  OSPREY_CHECK(headProductsInto(section(1), BH, T, T, hs, dscore, columns, qkv, qkvHeads.rows(0)));
  OSPREY_CHECK(headProductsInto(section(2), BH, T, T, hs, att, columns, dout, doutHeads.rows(0)));
  return dqkv;
}

}  // namespace gpt2
