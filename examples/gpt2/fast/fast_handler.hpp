// GPT-2 on the fast handler: osprey::Fast (float storage, TF32 tensor-core products) plus the
// derived layers it answers itself (layers/common.hpp, "Derived operations"). nvcc units only.
//
// Linear layers: the reference definitions (layers/matmul.hpp) transpose activations so that
// every product is a plain row-major matMul; cuBLAS reads an operand transposed for free, so each
// layer here is one product per output with no transposes:
//
//   matmulForward            out = x · w + bias       the bias in cuBLASLt's epilogue
//   matmulForwardTransposed  out = x · wtᵀ            (the tied lm head, and linear() in inference)
//   matmulBackward           dx = dout · wᵀ, dw = xᵀ · dout, dbias = 1ᵀ · dout (float sums, no TF32)
//   matmulBackwardTransposed dx = dout · wt, dwt = doutᵀ · x
//
// Attention: headProducts reads each head's block of qkv, att or dout in place (strided batched
// products, or a table of addresses where no single stride fits); attentionForward/Backward are
// those products around a fused float causal softmax (fast/causal_softmax.hpp), writing their
// outputs straight into (B, T, C) and (B, T, 3C). att (B, NH, T, T) is still materialised: the
// backward reads it, as the reference's does.
//
// LayerNorm, GELU and softmax cross-entropy (forward and backward): fused float kernels, one pass
// per row (fast/row_kernels.hpp). The encoder, residual sums, AdamW and the cached decoding step
// run their reference definitions on this handler (double arithmetic over float storage), with
// row sums and maxima folded as trees (osprey::Fast::foldRows).
//
// How far the results may be from the exact handlers' is docs/FAST.md; tests/cuda/fast_test.cu
// checks each fused layer against its reference definition on this handler, and the model
// against the exact handler.
#pragma once

#include <climits>
#include <cmath>
#include <optional>

#include "gpt2/fast/causal_softmax.hpp"
#include "gpt2/fast/decode_kernels.hpp"
#include "gpt2/fast/row_kernels.hpp"
#include "gpt2/layers/layers.hpp"
#include "osprey/gpu/fast.hpp"

namespace gpt2 {

class FastHandler : public osprey::Fast {
 public:
  explicit FastHandler(osprey::Fast base) : osprey::Fast(std::move(base)) {}

  osprey::Result<Buffer> matmulForward(const Buffer& x, const Buffer& w, const Buffer& bias, osprey::Index N,
                                       osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> matmulForwardTransposed(const Buffer& x, const Buffer& wt, osprey::Index N, osprey::Index IC,
                                                 osprey::Index OC);
  osprey::Result<MatmulGrads<FastHandler>> matmulBackward(const Buffer& dout, const Buffer& x, const Buffer& w,
                                                          osprey::Index N, osprey::Index IC, osprey::Index OC);
  osprey::Result<MatmulTransposedGrads<FastHandler>> matmulBackwardTransposed(const Buffer& dout, const Buffer& x,
                                                                              const Buffer& wt, osprey::Index N,
                                                                              osprey::Index IC, osprey::Index OC);
  // attention's per-head products (layers/attention_heads.hpp), each operand read in place
  osprey::Result<Buffer> headProducts(osprey::Index heads, osprey::Index rows, osprey::Index inner, osprey::Index cols,
                                      const Buffer& leftSrc, heads::Blocks left, const Buffer& rightSrc,
                                      heads::Blocks right);
  // Where headProductsInto writes: row r of head bh = b·NH + hh at data + b·batchStride +
  // hh·headStride + r·ld.
  struct HeadOutput {
    float* data;
    osprey::Index ld, headStride, batchStride;
  };
  osprey::Result<void> headProductsInto(HeadOutput out, osprey::Index heads, osprey::Index rows, osprey::Index inner,
                                        osprey::Index cols, const Buffer& leftSrc, heads::Blocks left,
                                        const Buffer& rightSrc, heads::Blocks right);

  // Causal attention (layers/attention.hpp): scores by cuBLAS in place, a fused float softmax
  // (fast/causal_softmax.hpp), the outputs written straight into their (B, T, C) / (B, T, 3C) places.
  osprey::Result<AttentionOut<FastHandler>> attentionForward(const Buffer& qkv, osprey::Index B, osprey::Index T,
                                                             osprey::Index C, osprey::Index NH);
  osprey::Result<Buffer> attentionBackward(const Buffer& dout, const Buffer& qkv, const Buffer& att, osprey::Index B,
                                           osprey::Index T, osprey::Index C, osprey::Index NH);

  // Row-wise layers as fused float kernels (fast/row_kernels.hpp).
  osprey::Result<LayerNormOut<FastHandler>> layernormForward(const Buffer& x, const Buffer& w, const Buffer& b,
                                                             osprey::Index N, osprey::Index C);
  osprey::Result<LayerNormGrads<FastHandler>> layernormBackward(const Buffer& dout, const Buffer& x, const Buffer& w,
                                                                const Buffer& mean, const Buffer& rstd,
                                                                osprey::Index N, osprey::Index C);
  osprey::Result<CrossEntropyOut<FastHandler>> crossEntropyForward(const Buffer& logits, const Buffer& targets,
                                                                   osprey::Index N, osprey::Index V);
  osprey::Result<Buffer> crossEntropyBackward(const Buffer& probs, const Buffer& targets, osprey::Index N,
                                              osprey::Index V, osprey::Scalar dloss);
  osprey::Result<AdamWOut<FastHandler>> adamwUpdate(const Buffer& param, const Buffer& grad, const Buffer& m,
                                                    const Buffer& v, osprey::Index t, osprey::Scalar lr,
                                                    osprey::Scalar beta1, osprey::Scalar beta2, osprey::Scalar eps,
                                                    osprey::Scalar weightDecay, bool decay);
  osprey::Result<Buffer> geluForward(const Buffer& x);
  osprey::Result<Buffer> geluBackward(const Buffer& dout, const Buffer& x);

  // One-row decoding (fast/decode_kernels.hpp): a linear layer with its bias (and GELU, or the
  // residual sum) in one kernel for a single row, the products with the bias written first for
  // more rows; attention of one query against the cache; the greedy argmax on the device.
  osprey::Result<Buffer> linear(const Buffer& x, const Buffer& wT, const Buffer& bias, osprey::Index N,
                                osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> linearGelu(const Buffer& in, const Buffer& wT, const Buffer& bias, osprey::Index N,
                                    osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> linearResidual(const Buffer& x, const Buffer& in, const Buffer& wT, const Buffer& bias,
                                        osprey::Index N, osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> attentionDecode(const Buffer& qkvRow, const Buffer& kCache, const Buffer& vCache,
                                         osprey::Index Tc, osprey::Index C, osprey::Index NH);
  osprey::Result<osprey::Index> greedyToken(const Buffer& logits);

 private:
  // out (N, OC) = x · op(w) + bias: the bias in cuBLASLt's epilogue, or (where it has no algorithm)
  // written first and the product added onto it.
  osprey::Result<Buffer> linearProduct(osprey::Operand x, osprey::Operand w, const Buffer& bias, osprey::Index N,
                                       osprey::Index IC, osprey::Index OC);
  // out (N, OC) = then(x · wTᵀ + bias): one row by linearRow, more by a product onto the bias.
  template <class Then>
  osprey::Result<Buffer> linearThen(const Buffer& x, const Buffer& wT, const Buffer& bias, osprey::Index N,
                                    osprey::Index IC, osprey::Index OC, Then then);
  // dst (rows, width), rows ldDst apart: src (rows, cols; rows ldSrc apart), then zeros to `width`
  // (width 0: cols).
  osprey::Result<void> copyRows(float* dst, osprey::Index ldDst, const float* src, osprey::Index ldSrc,
                                osprey::Index rows, osprey::Index cols, osprey::Index width = 0);
  // Every target an index in [0, V): a bad one is the reference's "index out of range" fault.
  osprey::Result<void> checkTargets(const Buffer& targets, osprey::Index V);
  // n ones, kept for the bias gradients' column sums (grown when a larger n is asked for).
  osprey::Result<const float*> ones(osprey::Index n);
  Buffer m_ones;
};

OSPREY_ASSERT_HANDLER(FastHandler, "fast (gpt2)");

namespace fast_detail {
// A raw launch's status, named.
inline osprey::Result<void> launched(const char* kernel) {
  OSPREY_CUDA_CHECK(cudaGetLastError(), kernel);
  return {};
}
// A width a kernel takes as an int.
inline osprey::Result<int> intWidth(const char* layer, osprey::Index width) {
  if (width <= 0 || width > INT_MAX) return osprey::Error{fmt::format("{}: width {} is not in [1, 2^31)", layer, width)};
  return static_cast<int>(width);
}
// Whether an (N, width) operand is worth re-laying with rows padded to 16 bytes for cuBLAS.
inline bool padsRows(osprey::Index N, osprey::Index width) { return width % 4 != 0 && N >= 64 && width >= 1024; }
inline osprey::Index paddedWidth(osprey::Index width) { return (width + 3) / 4 * 4; }
// b must hold rows × cols elements, checked as the reference layers check their operands.
inline osprey::Result<void> checkShape(FastHandler& h, const FastHandler::Buffer& b, osprey::Index rows,
                                       osprey::Index cols, const char* layer, const char* tensor) {
  return checkLength(h, b, OSPREY_TRY(checkedProduct(layer, {rows, cols})), layer, tensor);
}
// Element i of an (N, OC) output: the bias of its column.
struct BiasOfColumn {
  osprey::ViewOf<float> bias;
  osprey::Int columns;
  OSPREY_FN osprey::Scalar operator()(osprey::Index i) const { return bias[osprey::Int(i) % columns]; }
};
struct One {
  OSPREY_FN osprey::Scalar operator()(osprey::Index) const { return 1.0; }
};
struct Plus {
  OSPREY_FN osprey::Scalar operator()(osprey::Scalar a, osprey::Scalar b) const { return a + b; }
};
}  // namespace fast_detail

inline osprey::Result<FastHandler::Buffer> FastHandler::matmulForward(const Buffer& x, const Buffer& w,
                                                                      const Buffer& bias, osprey::Index N,
                                                                      osprey::Index IC, osprey::Index OC) {
  const char* L = "matmul";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, IC, OC, L, "weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, bias, 1, OC, L, "bias"));
  return linearProduct({x.data()}, {w.data()}, bias, N, IC, OC);
}

inline osprey::Result<FastHandler::Buffer> FastHandler::matmulForwardTransposed(const Buffer& x, const Buffer& wt,
                                                                                osprey::Index N, osprey::Index IC,
                                                                                osprey::Index OC) {
  const char* L = "matmul (transposed weight)";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wt, OC, IC, L, "weight"));
  if (N == 1) {  // the lm head while decoding: a bandwidth kernel, no bias
    const int ic = OSPREY_TRY(fast_detail::intWidth(L, IC)), oc = OSPREY_TRY(fast_detail::intWidth(L, OC));
    auto y = OSPREY_TRY(allocate(OC));
    const auto blocks = static_cast<unsigned>((OC + fast_kernels::kRowWarpsPerBlock - 1) / fast_kernels::kRowWarpsPerBlock);
    fast_kernels::linearRow<<<blocks, fast_kernels::kRowWarpsPerBlock * 32>>>(y.data(), wt.data(), x.data(), nullptr, ic,
                                                                             oc, fast_kernels::Biased{});
    OSPREY_CHECK(fast_detail::launched("fast one-row product launch"));
    return y;
  }
  auto out = OSPREY_TRY(allocate(OSPREY_TRY(checkedProduct(L, {N, OC}))));
  if (!fast_detail::padsRows(N, OC)) {
    OSPREY_CHECK(product(out.data(), {x.data()}, {wt.data(), true}, N, IC, OC));
    return out;
  }
  // (N, OC) rows that do not start on 16 bytes (the lm head's V = 50257) keep cuBLAS on its slow
  // unaligned kernels: the product goes to rows padded to a multiple of 4, then is packed.
  const osprey::Index padded = fast_detail::paddedWidth(OC);
  auto wide = OSPREY_TRY(allocate(N * padded));
  OSPREY_CHECK(product(wide.data(), {x.data()}, {wt.data(), true}, N, IC, OC, 0.0f, 1, osprey::Precision::TensorCores, padded));
  OSPREY_CHECK(copyRows(out.data(), OC, wide.data(), padded, N, OC));
  return out;
}

inline osprey::Result<MatmulGrads<FastHandler>> FastHandler::matmulBackward(const Buffer& dout, const Buffer& x,
                                                                            const Buffer& w, osprey::Index N,
                                                                            osprey::Index IC, osprey::Index OC) {
  const char* L = "matmul backward";
  OSPREY_CHECK(fast_detail::checkShape(*this, dout, N, OC, L, "dout"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, IC, OC, L, "weight"));
  auto dx = OSPREY_TRY(allocate(N * IC));
  OSPREY_CHECK(product(dx.data(), {dout.data()}, {w.data(), true}, N, OC, IC));     // (N, OC) · wᵀ
  auto dw = OSPREY_TRY(allocate(IC * OC));
  OSPREY_CHECK(product(dw.data(), {x.data(), true}, {dout.data()}, IC, N, OC));     // xᵀ · (N, OC)
  auto dbias = OSPREY_TRY(allocate(OC));
  OSPREY_CHECK(product(dbias.data(), {OSPREY_TRY(ones(N))}, {dout.data()}, 1, N, OC, 0.0f, 1,
                       osprey::Precision::Float));
  return MatmulGrads<FastHandler>{std::move(dx), std::move(dw), std::move(dbias)};
}

inline osprey::Result<MatmulTransposedGrads<FastHandler>> FastHandler::matmulBackwardTransposed(
    const Buffer& dout, const Buffer& x, const Buffer& wt, osprey::Index N, osprey::Index IC, osprey::Index OC) {
  const char* L = "matmul (transposed weight) backward";
  OSPREY_CHECK(fast_detail::checkShape(*this, dout, N, OC, L, "dout"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wt, OC, IC, L, "weight"));
  auto dx = OSPREY_TRY(allocate(N * IC));
  if (!fast_detail::padsRows(N, OC)) {
    OSPREY_CHECK(product(dx.data(), {dout.data()}, {wt.data()}, N, OC, IC));          // (N, OC) · wt
    auto dwt = OSPREY_TRY(allocate(OC * IC));
    OSPREY_CHECK(product(dwt.data(), {dout.data(), true}, {x.data()}, OC, N, IC));    // doutᵀ · x
    return MatmulTransposedGrads<FastHandler>{std::move(dx), std::move(dwt)};
  }
  // OC not a multiple of 4 (the lm head's V) keeps cuBLAS on unaligned kernels, whether OC is the
  // inner dimension (dx) or the output's rows (dwt): both products run over OC padded to Vp with
  // zeros (dout's extra columns, wt's extra rows), which adds nothing, and dwt is the first OC rows.
  const osprey::Index Vp = fast_detail::paddedWidth(OC);
  auto doutWide = OSPREY_TRY(allocate(N * Vp));
  OSPREY_CHECK(copyRows(doutWide.data(), Vp, dout.data(), OC, N, OC, Vp));
  auto wtWide = OSPREY_TRY(allocate(Vp * IC));
  OSPREY_CHECK(copyRows(wtWide.data(), IC, wt.data(), IC, OC, IC));
  OSPREY_CUDA_CHECK(cudaMemsetAsync(wtWide.data() + OC * IC, 0, static_cast<std::size_t>((Vp - OC) * IC) * sizeof(float)),
                    "zeroing the padded weight rows");
  OSPREY_CHECK(product(dx.data(), {doutWide.data()}, {wtWide.data()}, N, Vp, IC));       // (N, Vp) · wt (Vp, IC)
  auto dwtWide = OSPREY_TRY(allocate(Vp * IC));
  OSPREY_CHECK(product(dwtWide.data(), {doutWide.data(), true}, {x.data()}, Vp, N, IC));  // doutᵀ · x, (Vp, IC)
  auto dwt = dwtWide.prefix(OC * IC);
  return MatmulTransposedGrads<FastHandler>{std::move(dx), std::move(dwt)};
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
  const auto ld = [](const osprey::Operand& o, osprey::Index packedRows, osprey::Index packedCols) {
    return o.ld ? o.ld : o.transposed ? packedRows : packedCols;
  };
  return productsAt(const_cast<float* const*>(table + 2 * heads), out.ld, table, a.operand.transposed,
                    ld(a.operand, rows, inner), table + heads, b.operand.transposed, ld(b.operand, inner, cols), rows,
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
  const heads::Layout qkvHeads{T, 3 * C, NH, hs};
  // scores (B, NH, T, T) = q · kᵀ per head, then att in place.
  auto att = OSPREY_TRY(headProducts(BH, T, hs, T, qkv, qkvHeads.rows(0), qkv, qkvHeads.transposed(C)));
  OSPREY_CHECK(fast_kernels::causalSoftmax(att.data(), R, T, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)))));
  // out (B, T, C): head hh of batch b writes columns [hh·hs, (hh+1)·hs) of rows b·T ...
  auto out = OSPREY_TRY(allocate(OSPREY_TRY(checkedProduct(L, {B, T, C}))));
  OSPREY_CHECK(headProductsInto({out.data(), C, hs, T * C}, BH, T, T, hs, att, heads::squareRows(NH, T), qkv,
                                qkvHeads.rows(2 * C)));
  return AttentionOut<FastHandler>{std::move(out), std::move(att)};
}

inline osprey::Result<FastHandler::Buffer> FastHandler::attentionBackward(const Buffer& dout, const Buffer& qkv,
                                                                          const Buffer& att, osprey::Index B,
                                                                          osprey::Index T, osprey::Index C,
                                                                          osprey::Index NH) {
  const char* L = "attention backward";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  OSPREY_CHECK(checkLength(*this, dout, OSPREY_TRY(checkedProduct(L, {B, T, C})), L, "dout"));
  const osprey::Index n3 = OSPREY_TRY(checkedProduct(L, {B, T, 3, C}));
  OSPREY_CHECK(checkLength(*this, qkv, n3, L, "qkv"));
  const osprey::Index BH = OSPREY_TRY(checkedProduct(L, {B, NH})), R = OSPREY_TRY(checkedProduct(L, {BH, T}));
  OSPREY_CHECK(checkLength(*this, att, OSPREY_TRY(checkedProduct(L, {R, T})), L, "att"));
  const heads::Layout qkvHeads{T, 3 * C, NH, hs}, doutHeads{T, C, NH, hs};
  const heads::Blocks rows = heads::squareRows(NH, T), columns = heads::squareColumns(NH, T);
  // datt = dout · vᵀ, then in place the gradient of the unscaled scores.
  auto dscore = OSPREY_TRY(headProducts(BH, T, hs, T, dout, doutHeads.rows(0), qkv, qkvHeads.transposed(2 * C)));
  OSPREY_CHECK(fast_kernels::causalSoftmaxGradient(dscore.data(), att.data(), R, T,
                                                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)))));
  // dqkv (B, T, 3C): dq = dscore · k, dk = dscoreᵀ · q, dv = attᵀ · dout, each into its section.
  auto dqkv = OSPREY_TRY(allocate(n3));
  const auto section = [&](osprey::Index s) { return HeadOutput{dqkv.data() + s * C, 3 * C, hs, T * 3 * C}; };
  OSPREY_CHECK(headProductsInto(section(0), BH, T, T, hs, dscore, rows, qkv, qkvHeads.rows(C)));
  OSPREY_CHECK(headProductsInto(section(1), BH, T, T, hs, dscore, columns, qkv, qkvHeads.rows(0)));
  OSPREY_CHECK(headProductsInto(section(2), BH, T, T, hs, att, columns, dout, doutHeads.rows(0)));
  return dqkv;
}

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
  auto out = OSPREY_TRY(allocate(N * C));
  auto mean = OSPREY_TRY(allocate(N));
  auto rstd = OSPREY_TRY(allocate(N));
  if (N > 0) {
    fast_kernels::layerNormForward<<<fast_kernels::rowBlocks(N), fast_kernels::kRowWarps * 32>>>(
        out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, Ci, static_cast<float>(kLayerNormEps));
    OSPREY_CHECK(fast_detail::launched("fast layernorm launch"));
  }
  return LayerNormOut<FastHandler>{std::move(out), std::move(mean), std::move(rstd)};
}

inline osprey::Result<LayerNormGrads<FastHandler>> FastHandler::layernormBackward(
    const Buffer& dout, const Buffer& x, const Buffer& w, const Buffer& mean, const Buffer& rstd, osprey::Index N,
    osprey::Index C) {
  const char* L = "layernorm backward";
  OSPREY_CHECK(fast_detail::checkShape(*this, dout, N, C, L, "dout"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, C, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, w, 1, C, L, "weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, mean, N, 1, L, "mean"));
  OSPREY_CHECK(fast_detail::checkShape(*this, rstd, N, 1, L, "rstd"));
  const int Ci = OSPREY_TRY(fast_detail::intWidth(L, C));
  auto dx = OSPREY_TRY(allocate(N * C));
  auto doutNorm = OSPREY_TRY(allocate(N * C));
  if (N > 0) {
    fast_kernels::layerNormBackward<<<fast_kernels::rowBlocks(N), fast_kernels::kRowWarps * 32>>>(
        dx.data(), doutNorm.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, Ci);
    OSPREY_CHECK(fast_detail::launched("fast layernorm backward launch"));
  }
  // dw = 1ᵀ · (dout ⊙ norm), db = 1ᵀ · dout: column sums over the N rows, in full float.
  auto dw = OSPREY_TRY(allocate(C));
  auto db = OSPREY_TRY(allocate(C));
  const float* one = OSPREY_TRY(ones(N));
  OSPREY_CHECK(product(dw.data(), {one}, {doutNorm.data()}, 1, N, C, 0.0f, 1, osprey::Precision::Float));
  OSPREY_CHECK(product(db.data(), {one}, {dout.data()}, 1, N, C, 0.0f, 1, osprey::Precision::Float));
  return LayerNormGrads<FastHandler>{std::move(dx), std::move(dw), std::move(db)};
}

inline osprey::Result<void> FastHandler::checkTargets(const Buffer& targets, osprey::Index V) {
  (void)OSPREY_TRY(build(targets.size(), fast_detail::TargetIndex{targets.view(), V}));
  return {};
}

inline osprey::Result<CrossEntropyOut<FastHandler>> FastHandler::crossEntropyForward(const Buffer& logits,
                                                                                     const Buffer& targets,
                                                                                     osprey::Index N,
                                                                                     osprey::Index V) {
  const char* L = "cross-entropy";
  OSPREY_CHECK(fast_detail::checkShape(*this, logits, N, V, L, "logits"));
  OSPREY_CHECK(fast_detail::checkShape(*this, targets, N, 1, L, "targets"));
  const int Vi = OSPREY_TRY(fast_detail::intWidth(L, V));
  OSPREY_CHECK(checkTargets(targets, V));
  auto probs = OSPREY_TRY(allocate(N * V));
  auto losses = OSPREY_TRY(allocate(N));
  if (N > 0) {
    fast_kernels::crossEntropyForward<<<static_cast<unsigned>(N), fast_kernels::kVocabThreads>>>(
        probs.data(), losses.data(), logits.data(), targets.data(), N, Vi);
    OSPREY_CHECK(fast_detail::launched("fast cross-entropy launch"));
  }
  return CrossEntropyOut<FastHandler>{std::move(losses), std::move(probs)};
}

inline osprey::Result<FastHandler::Buffer> FastHandler::crossEntropyBackward(const Buffer& probs,
                                                                             const Buffer& targets, osprey::Index N,
                                                                             osprey::Index V, osprey::Scalar dloss) {
  const char* L = "cross-entropy backward";
  OSPREY_CHECK(fast_detail::checkShape(*this, probs, N, V, L, "probs"));
  OSPREY_CHECK(fast_detail::checkShape(*this, targets, N, 1, L, "targets"));
  const int Vi = OSPREY_TRY(fast_detail::intWidth(L, V));
  OSPREY_CHECK(checkTargets(targets, V));
  auto dlogits = OSPREY_TRY(allocate(N * V));
  if (N > 0) {
    fast_kernels::crossEntropyBackward<<<static_cast<unsigned>(N), fast_kernels::kVocabThreads>>>(
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
  const char* L = "adamw";
  const osprey::Index n = param.size();
  OSPREY_CHECK(checkLength(*this, grad, n, L, "grad"));
  OSPREY_CHECK(checkLength(*this, m, n, L, "first moment"));
  OSPREY_CHECK(checkLength(*this, v, n, L, "second moment"));
  if (t < 1) return osprey::Error{fmt::format("{}: step must be 1 or more, got {}", L, t)};
  const osprey::Scalar bc1 = 1.0 - osprey::math::powi(beta1, t), bc2 = 1.0 - osprey::math::powi(beta2, t);
  auto p2 = OSPREY_TRY(allocate(n)), m2 = OSPREY_TRY(allocate(n)), v2 = OSPREY_TRY(allocate(n));
  OSPREY_CHECK(runtime()->forEach(
      n, fast_kernels::AdamWBody{p2.data(), m2.data(), v2.data(), param.data(), grad.data(), m.data(), v.data(),
                                 static_cast<float>(beta1), static_cast<float>(beta2),
                                 static_cast<float>(decay ? 1.0 - lr * weightDecay : 1.0),
                                 static_cast<float>(-(lr / bc1)), static_cast<float>(osprey::math::sqrt(bc2)),
                                 static_cast<float>(eps)}));
  return AdamWOut<FastHandler>{std::move(p2), std::move(m2), std::move(v2)};
}

inline osprey::Result<FastHandler::Buffer> FastHandler::geluForward(const Buffer& x) {
  auto y = OSPREY_TRY(allocate(x.size()));
  OSPREY_CHECK(runtime()->forEach(x.size(), fast_kernels::GeluForwardBody{y.data(), x.data()}));
  return y;
}

inline osprey::Result<FastHandler::Buffer> FastHandler::geluBackward(const Buffer& dout, const Buffer& x) {
  OSPREY_CHECK(checkLength(*this, dout, x.size(), "gelu backward", "dout"));
  auto dx = OSPREY_TRY(allocate(x.size()));
  OSPREY_CHECK(runtime()->forEach(x.size(), fast_kernels::GeluBackwardBody{dx.data(), dout.data(), x.data()}));
  return dx;
}

inline osprey::Result<void> FastHandler::copyRows(float* dst, osprey::Index ldDst, const float* src,
                                                 osprey::Index ldSrc, osprey::Index rows, osprey::Index cols,
                                                 osprey::Index width) {
  if (rows == 0 || cols == 0) return {};
  const int c = OSPREY_TRY(fast_detail::intWidth("copy rows", cols));
  const int w = width > cols ? OSPREY_TRY(fast_detail::intWidth("copy rows", width)) : c;
  fast_kernels::copyRows<<<fast_kernels::copyGrid(rows, w), fast_kernels::kCopyThreads>>>(dst, ldDst, src, ldSrc, rows,
                                                                                         c, w);
  return fast_detail::launched("fast row copy launch");
}

inline osprey::Result<FastHandler::Buffer> FastHandler::linearProduct(osprey::Operand x, osprey::Operand w,
                                                                      const Buffer& bias, osprey::Index N,
                                                                      osprey::Index IC, osprey::Index OC) {
  auto out = OSPREY_TRY(allocate(OSPREY_TRY(checkedProduct("linear", {N, OC}))));
  if (N == 0 || OC == 0) return out;
  if (IC > 0 && OSPREY_TRY(productPlusBias(out.data(), x, w, N, IC, OC, bias.data()))) return out;
  out = OSPREY_TRY(build(N * OC, fast_detail::BiasOfColumn{bias.view(), OC}));
  OSPREY_CHECK(product(out.data(), x, w, N, IC, OC, 1.0f));
  return out;
}

template <class Then>
osprey::Result<FastHandler::Buffer> FastHandler::linearThen(const Buffer& x, const Buffer& wT, const Buffer& bias,
                                                            osprey::Index N, osprey::Index IC, osprey::Index OC,
                                                            Then then) {
  const char* L = "linear";
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, L, "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wT, OC, IC, L, "weight"));
  OSPREY_CHECK(fast_detail::checkShape(*this, bias, 1, OC, L, "bias"));
  const int ic = OSPREY_TRY(fast_detail::intWidth(L, IC)), oc = OSPREY_TRY(fast_detail::intWidth(L, OC));
  if (N != 1) return osprey::Error{"linear: the fused one-row path takes one row"};
  auto y = OSPREY_TRY(allocate(OC));
  const auto blocks = static_cast<unsigned>((OC + fast_kernels::kRowWarpsPerBlock - 1) / fast_kernels::kRowWarpsPerBlock);
  fast_kernels::linearRow<<<blocks, fast_kernels::kRowWarpsPerBlock * 32>>>(y.data(), wT.data(), x.data(), bias.data(),
                                                                           ic, oc, then);
  OSPREY_CHECK(fast_detail::launched("fast one-row linear launch"));
  return y;
}

inline osprey::Result<FastHandler::Buffer> FastHandler::linear(const Buffer& x, const Buffer& wT, const Buffer& bias,
                                                               osprey::Index N, osprey::Index IC, osprey::Index OC) {
  if (N == 1) return linearThen(x, wT, bias, N, IC, OC, fast_kernels::Biased{});
  OSPREY_CHECK(fast_detail::checkShape(*this, bias, 1, OC, "linear", "bias"));
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, IC, "linear", "x"));
  OSPREY_CHECK(fast_detail::checkShape(*this, wT, OC, IC, "linear", "weight"));
  return linearProduct({x.data()}, {wT.data(), true}, bias, N, IC, OC);
}

inline osprey::Result<FastHandler::Buffer> FastHandler::linearGelu(const Buffer& in, const Buffer& wT,
                                                                   const Buffer& bias, osprey::Index N,
                                                                   osprey::Index IC, osprey::Index OC) {
  if (N == 1) return linearThen(in, wT, bias, N, IC, OC, fast_kernels::GeluOf{});
  return geluForward(OSPREY_TRY(linear(in, wT, bias, N, IC, OC)));
}

inline osprey::Result<FastHandler::Buffer> FastHandler::linearResidual(const Buffer& x, const Buffer& in,
                                                                       const Buffer& wT, const Buffer& bias,
                                                                       osprey::Index N, osprey::Index IC,
                                                                       osprey::Index OC) {
  OSPREY_CHECK(fast_detail::checkShape(*this, x, N, OC, "residual", "a"));
  if (N == 1) return linearThen(in, wT, bias, N, IC, OC, fast_kernels::PlusResidual{x.data()});
  auto y = OSPREY_TRY(linear(in, wT, bias, N, IC, OC));
  return zipWith(x, y, fast_detail::Plus{});
}

inline osprey::Result<FastHandler::Buffer> FastHandler::attentionDecode(const Buffer& qkvRow, const Buffer& kCache,
                                                                        const Buffer& vCache, osprey::Index Tc,
                                                                        osprey::Index C, osprey::Index NH) {
  const char* L = "attention decode";
  const osprey::Index hs = OSPREY_TRY(detail::headSize(L, C, NH));
  if (Tc <= 0) return osprey::Error{fmt::format("{}: the cache must hold the new position", L)};
  if (Tc > fast_kernels::kDecodeMaxPositions || hs > fast_kernels::kDecodeThreads)
    return osprey::Error{fmt::format("{}: {} positions of {}-wide heads exceed the fused kernel's {} and {}", L, Tc, hs,
                                     fast_kernels::kDecodeMaxPositions, fast_kernels::kDecodeThreads)};
  OSPREY_CHECK(fast_detail::checkShape(*this, qkvRow, 3, C, L, "qkv row"));
  OSPREY_CHECK(fast_detail::checkShape(*this, kCache, Tc, C, L, "key cache"));
  OSPREY_CHECK(fast_detail::checkShape(*this, vCache, Tc, C, L, "value cache"));
  auto out = OSPREY_TRY(allocate(C));
  fast_kernels::attendOneRow<<<static_cast<unsigned>(NH), fast_kernels::kDecodeThreads>>>(
      out.data(), qkvRow.data(), kCache.data(), vCache.data(), static_cast<int>(Tc), static_cast<int>(C),
      static_cast<int>(hs), static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))));
  OSPREY_CHECK(fast_detail::launched("fast attention decode launch"));
  return out;
}

inline osprey::Result<osprey::Index> FastHandler::greedyToken(const Buffer& logits) {
  const int n = OSPREY_TRY(fast_detail::intWidth("generate", logits.size()));
  if (n >= (1 << 24)) return osprey::Error{"generate: more than 2^24 logits"};
  auto best = OSPREY_TRY(allocate(1));
  fast_kernels::argmaxKernel<<<1, fast_kernels::kArgmaxThreads>>>(best.data(), logits.data(), n);
  OSPREY_CHECK(fast_detail::launched("fast argmax launch"));
  const osprey::Scalar at = get(best, 0);
  if (at < 0) return osprey::Error{"generate: the logits have no maximum (all NaN): the weights are broken"};
  return static_cast<osprey::Index>(at);
}

inline osprey::Result<const float*> FastHandler::ones(osprey::Index n) {
  if (m_ones.size() < n)
    m_ones = OSPREY_TRY(build(n, fast_detail::One{}));
  return static_cast<const float*>(m_ones.data());
}

}  // namespace gpt2
