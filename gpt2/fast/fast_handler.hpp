// GPT-2 on the fast handler: osprey::Fast (float storage, tensor-core products) plus the derived
// layers it answers itself (layers/common.hpp, "Derived operations"). nvcc units only. The linear
// layers' and flash attention's products read bf16 twins of their float operands
// (fast/bf16_twins.hpp; Products::Bf16, the default) or the floats as TF32 (Products::Tf32).
//
// Linear layers: the reference definitions (layers/matmul.hpp) transpose activations so that
// every product is a plain row-major matMul; cuBLAS reads an operand transposed for free, so each
// layer here is one product per output with no transposes:
//
//   matmulForward            out = x · w + bias       the bias in cuBLASLt's epilogue
//   matmulForwardTransposed  out = x · wtᵀ            (the tied lm head, and linear() in inference)
//   matmulBackward           dx = dout · wᵀ, dw = xᵀ · dout, dbias = 1ᵀ · dout (float sums: taken by
//                            the kernel that wrote dout where it kept them (fast/column_sums.hpp),
//                            else of the floats)
//   residualMatmulForward    out = x + (in · w + bias)   the residual stream too in the epilogue
//   matmulAttentionForward   qkv = x · w + bias, then attention: with bf16 products and flash
//                            attention, qkv written by the product as bf16 (its only reader's form)
//   matmulBackwardTransposed dx = dout · wt, dwt = doutᵀ · x
//
// Attention: at head size 64, flash attention (fast/flash_attention.hpp): tensor-core tiles of
// bf16 (copied from qkv's and dout's twins) or TF32, the online softmax, the (T, T) scores never
// stored; the forward's att is a copy of the output and each softmax row's log-sum-exp
// (fast_shapes::flashSaved), which the backward reads to recompute the probabilities tile by tile. On an H100/H200 with bf16 tiles, the forward and the backward's keys kernel are
// Hopper's warpgroup products instead (fast/flash_forward_wgmma.hpp, fast/flash_backward_wgmma.hpp),
// with the same bits. Other head sizes: headProducts reads each head's block of qkv, att or dout in
// place (strided batched products, or a table of addresses where no single stride fits) around
// a fused float causal softmax (fast/causal_softmax.hpp), and att is the probabilities.
//
// LayerNorm, GELU, softmax cross-entropy (forward and backward) and AdamW: fused float kernels,
// one pass per row (fast/row_kernels.hpp). The embedding backward gathers each token's rows found
// by a stable sort (fast/token_sums.hpp). The encoder forward and the residual sums run their
// reference definitions on this handler (double arithmetic over float storage), with row sums and
// maxima folded as trees (osprey::Fast::foldRows).
//
// Decoding (fast/decode_layers.hpp, fast/decode_graph.hpp): one bandwidth kernel per linear layer
// with the LayerNorm before it and the GELU or residual after it, one kernel for attention and the
// cache's new row, the argmax on the device; and the whole step recorded once as a CUDA graph and
// replayed for every further token, reading bf16 copies of the product weights
// (fast/half_weights.hpp) unless told to read the floats.
//
// The class is those layers and the parts it owns, each a type in a file of its own: the bf16 twin
// cache (fast/bf16_twins.hpp), the column sums that kernels keep for the bias gradients
// (fast/column_sums.hpp), the product choice (fast/product_choice.hpp), the outputs whose floats
// come later (fast/deferred_floats.hpp), the occupancy answers (fast/occupancy.hpp), the decode
// recorder (fast/decode_graph.hpp) and the decoding weights' bf16 copies (fast/half_weights.hpp).
// The layers' definitions follow the class, one file per family (fast/*_layers.hpp, and
// fast/twin_use.hpp for how they use the twins).
//
// How far the results may be from the exact handlers' is docs/FAST.md; tests/cuda/fast_test.cu
// checks each fused layer against its reference definition on this handler, and the model
// against the exact handler.
#pragma once

#include <array>
#include <climits>
#include <memory>
#include <cmath>
#include <cstdio>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "gpt2/fast/bf16_twins.hpp"
#include "gpt2/fast/causal_softmax.hpp"
#include "gpt2/fast/column_sums.hpp"
#include "gpt2/fast/decode_graph.hpp"
#include "gpt2/fast/decode_kernels.hpp"
#include "gpt2/fast/deferred_floats.hpp"
#include "gpt2/fast/flash_attention.hpp"
#include "gpt2/fast/flash_backward_wgmma.hpp"
#include "gpt2/fast/flash_forward_wgmma.hpp"
#include "gpt2/fast/half_weights.hpp"
#include "gpt2/fast/launch_checks.hpp"
#include "gpt2/fast/occupancy.hpp"
#include "gpt2/fast/product_choice.hpp"
#include "gpt2/fast/row_kernels.hpp"
#include "gpt2/fast/token_choice.hpp"
#include "gpt2/fast/token_sums.hpp"
#include "gpt2/model/generate.hpp"  // the model, and the reference continuation
#include "osprey/gpu/cuda/fast.hpp"

namespace gpt2 {

class FastHandler : public osprey::Fast {
 public:
  explicit FastHandler(osprey::Fast base) : osprey::Fast(std::move(base)), m_twins(runtime()) {}

  osprey::Result<Buffer> matmulForward(const Buffer& x, const Buffer& w, const Buffer& bias, osprey::Index N,
                                       osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> matmulForwardTransposed(const Buffer& x, const Buffer& wt, osprey::Index N, osprey::Index IC,
                                                 osprey::Index OC);
  // x + (in · w + bias) (layers/residual.hpp): the residual stream added in the product's epilogue.
  osprey::Result<Buffer> residualMatmulForward(const Buffer& x, const Buffer& in, const Buffer& w, const Buffer& bias,
                                               osprey::Index N, osprey::Index IC, osprey::Index OC);
  osprey::Result<MatmulGrads<FastHandler>> matmulBackward(const Buffer& dout, const Buffer& x, const Buffer& w,
                                                          osprey::Index N, osprey::Index IC, osprey::Index OC);
  // The fc projection's backward, then GELU's (layers/projected.hpp): with bf16 products, the
  // projection's dx stored as bf16, which GELU's backward reads as bf16 values.
  osprey::Result<GeluMatmulGrads<FastHandler>> geluMatmulBackward(const Buffer& dout, const Buffer& g, const Buffer& w,
                                                                  const Buffer& f, osprey::Index N, osprey::Index IC,
                                                                  osprey::Index OC);
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

  // Causal attention (layers/attention.hpp): flash attention at head size 64
  // (fast/flash_attention.hpp); otherwise scores by cuBLAS in place and a fused float softmax
  // (fast/causal_softmax.hpp). The outputs are written straight into their (B, T, C) / (B, T, 3C) places.
  osprey::Result<AttentionOut<FastHandler>> attentionForward(const Buffer& qkv, osprey::Index B, osprey::Index T,
                                                             osprey::Index C, osprey::Index NH);
  osprey::Result<Buffer> attentionBackward(const Buffer& dout, const Buffer& qkv, const Buffer& att, osprey::Index B,
                                           osprey::Index T, osprey::Index C, osprey::Index NH);
  // qkv = x · w + bias, then attention (layers/projected.hpp). With bf16 products and
  // flash attention, which reads qkv's bf16 twin alone, qkv is stored as bf16: the product writes
  // the twin itself (the bias rounded to bf16 too, as cuBLASLt adds it to a bf16 output), and
  // qkv's floats, made only when something reads them, are the twin's values. Otherwise the two
  // layers.
  osprey::Result<ProjectedAttentionOut<FastHandler>> matmulAttentionForward(const Buffer& x, const Buffer& w,
                                                                            const Buffer& bias, osprey::Index B,
                                                                            osprey::Index T, osprey::Index C,
                                                                            osprey::Index NH);
  // fc = x · w + bias, then GELU (layers/projected.hpp): with bf16 products, fc stored as bf16 as
  // qkv is above, which GELU (forward here, backward later) reads as bf16 values; otherwise the
  // two layers.
  osprey::Result<ProjectedGeluOut<FastHandler>> matmulGeluForward(const Buffer& x, const Buffer& w, const Buffer& bias,
                                                                  osprey::Index N, osprey::Index IC, osprey::Index OC);

  // Row-wise layers as fused float kernels (fast/row_kernels.hpp).
  osprey::Result<LayerNormOut<FastHandler>> layernormForward(const Buffer& x, const Buffer& w, const Buffer& b,
                                                             osprey::Index N, osprey::Index C);
  osprey::Result<LayerNormGrads<FastHandler>> layernormBackward(const Buffer& dout, const Buffer& x, const Buffer& w,
                                                                const Buffer& mean, const Buffer& rstd,
                                                                osprey::Index N, osprey::Index C);
  // The same with dresid added onto dx in the kernel (layers/residual.hpp), and dx's twin written
  // beside it: the sum is the next linear layer's dout.
  osprey::Result<LayerNormGrads<FastHandler>> residualLayernormBackward(const Buffer& dresid, const Buffer& dout,
                                                                        const Buffer& x, const Buffer& w,
                                                                        const Buffer& mean, const Buffer& rstd,
                                                                        osprey::Index N, osprey::Index C);
  // The lm head and the loss (layers/head_loss.hpp): for the lm head's V, the logits stay in rows
  // padded to a multiple of 4 and the probabilities overwrite them there; the backward's padded
  // products read the probabilities as they are and take the targets' one-hot share off after, so
  // the logits are never packed and dlogits never formed (fast/head_loss_layers.hpp).
  osprey::Result<CrossEntropyOut<FastHandler>> headLoss(const Buffer& z, const Buffer& wte, const Buffer& targets,
                                                        osprey::Index N, osprey::Index C, osprey::Index V);
  osprey::Result<MatmulTransposedGrads<FastHandler>> headLossBackward(const Buffer& probs, const Buffer& targets,
                                                                      const Buffer& z, const Buffer& wte,
                                                                      osprey::Index N, osprey::Index C, osprey::Index V,
                                                                      osprey::Scalar dloss);
  osprey::Result<CrossEntropyOut<FastHandler>> crossEntropyForward(const Buffer& logits, const Buffer& targets,
                                                                   osprey::Index N, osprey::Index V);
  osprey::Result<Buffer> crossEntropyBackward(const Buffer& probs, const Buffer& targets, osprey::Index N,
                                              osprey::Index V, osprey::Scalar dloss);
  osprey::Result<AdamWOut<FastHandler>> adamwUpdate(const Buffer& param, const Buffer& grad, const Buffer& m,
                                                    const Buffer& v, osprey::Index t, osprey::Scalar lr,
                                                    osprey::Scalar beta1, osprey::Scalar beta2, osprey::Scalar eps,
                                                    osprey::Scalar weightDecay, bool decay);
  // Every tensor's update in a few launches (fast_kernels::adamwTensors).
  osprey::Result<std::vector<AdamWOut<FastHandler>>> adamwUpdates(
      const std::vector<Buffer>& params, const std::vector<Buffer>& grads, const std::vector<Buffer>& ms,
      const std::vector<Buffer>& vs, osprey::Index t, osprey::Scalar lr, osprey::Scalar beta1, osprey::Scalar beta2,
      osprey::Scalar eps, osprey::Scalar weightDecay, const std::vector<bool>& decay);
  // Whether an element of the tensors is NaN or infinite (train::anyNonFinite): one read of each
  // in a few launches (fast_kernels::nonFiniteTensors), where the reference takes about four
  // launches a tensor.
  osprey::Result<bool> anyNonFinite(const std::vector<Buffer>& tensors);
  // The embedding backward (layers/encoder.hpp; fast/token_sums.hpp), alone and onto the lm
  // head's share of dwte.
  osprey::Result<EncoderGrads<FastHandler>> encoderBackward(const Buffer& dout, const Buffer& tokens, osprey::Index N,
                                                            osprey::Index T, osprey::Index C, osprey::Index V,
                                                            osprey::Index maxT, osprey::Index posOffset);
  osprey::Result<EncoderGrads<FastHandler>> encoderBackwardOnto(const Buffer& dwteBase, const Buffer& dout,
                                                                const Buffer& tokens, osprey::Index N, osprey::Index T,
                                                                osprey::Index C, osprey::Index V, osprey::Index maxT,
                                                                osprey::Index posOffset);
  osprey::Result<Buffer> geluForward(const Buffer& x);
  osprey::Result<Buffer> geluBackward(const Buffer& dout, const Buffer& x);

  // One-row decoding (fast/decode_kernels.hpp): a linear layer with its bias (and GELU, or the
  // residual sum) in one kernel for a single row, a product with the bias in its epilogue for more
  // rows; attention of one query against the cache; the greedy argmax on the device.
  osprey::Result<Buffer> linear(const Buffer& x, const Buffer& wT, const Buffer& bias, osprey::Index N,
                                osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> linearGelu(const Buffer& in, const Buffer& wT, const Buffer& bias, osprey::Index N,
                                    osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> linearResidual(const Buffer& x, const Buffer& in, const Buffer& wT, const Buffer& bias,
                                        osprey::Index N, osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> attentionDecode(const Buffer& qkvRow, const Buffer& kCache, const Buffer& vCache,
                                         osprey::Index Tc, osprey::Index C, osprey::Index NH);
  osprey::Result<osprey::Index> greedyToken(const Buffer& logits);
  // The LayerNorm in front of a one-row linear layer, inside the product's kernel (model.hpp's
  // normLinear, normLinearGelu and normLogits); more rows: layernormForward, then the layer.
  osprey::Result<Buffer> normLinear(const Buffer& x, const Buffer& lnWeight, const Buffer& lnBias, const Buffer& wT,
                                    const Buffer& bias, osprey::Index N, osprey::Index IC, osprey::Index OC);
  osprey::Result<Buffer> normLinearGelu(const Buffer& x, const Buffer& lnWeight, const Buffer& lnBias,
                                        const Buffer& wT, const Buffer& bias, osprey::Index N, osprey::Index IC,
                                        osprey::Index OC);
  osprey::Result<Buffer> normLogits(const Buffer& x, const Buffer& lnWeight, const Buffer& lnBias, const Buffer& wte,
                                    osprey::Index N, osprey::Index C, osprey::Index V);

  // Decoding as a CUDA graph (fast/decode_graph.hpp): continueGreedy records one decodeStep and
  // replays it for every further token, the token and its position staying on the device; while it
  // records, encoderForward is the embedding the step before wrote, attendAppending reads the
  // position from the device and grows the cache in place, and normLogits also chooses the token.
  // Otherwise (and with setDecodeGraphs(false)) they are the reference definitions.
  // (Weights, Step: ForwardWeights and StepOut of this handler, named once it is complete.)
  template <class Weights, class Step, class OnToken>
  osprey::Result<std::vector<int>> continueGreedy(const Weights& w, Step& step, osprey::Index count, OnToken& onToken);
  osprey::Result<Buffer> encoderForward(const Buffer& tokens, const Buffer& wte, const Buffer& wpe, osprey::Index N,
                                        osprey::Index T, osprey::Index C, osprey::Index posOffset);
  osprey::Result<AttendAppendingOut<FastHandler>> attendAppending(const Buffer& qkvRow, const Buffer& keys,
                                                                  const Buffer& values, osprey::Index Tc,
                                                                  osprey::Index C, osprey::Index NH);
  void setDecodeGraphs(bool on) { m_recorder.setOn(on); }

  // What the linear layers' products of more than one row read: bf16 twins of their float
  // operands (the default) or the floats as TF32 (fast/product_choice.hpp).
  using Products = fast_parts::Products;
  void setProducts(Products products) { m_products.set(products); }
  Products products() const { return m_products.get(); }
  // Whether bf16 products also leave the floats of outputs read only as bf16 unmade until
  // something reads them (twinOnly; on by default): a training step's LayerNorm and GELU outputs
  // and GELU's and attention's input gradients are then stored and written as bf16 alone, in
  // half the memory. Off: the floats at once (fast/deferred_floats.hpp).
  void setDeferredFloats(bool on) { m_deferredFloats.set(on); }
  // How many deferred outputs have had their floats made since the handler was made.
  osprey::Index deferredFloatsWritten() const { return m_deferredFloats.written(); }
  // How many bias gradients matmulBackward has taken from its dout's producer: the LayerNorm
  // backwards, flash attention's backward and GELU's (inside geluMatmulBackward) sum the columns
  // of the gradient they write as they write it, in float from its float values, and a linear
  // layer's bias gradient is the column sums of its dout (fast/column_sums.hpp).
  osprey::Index biasSumsTaken() const { return m_columnSums.taken(); }
  std::string device() const { return deviceWith(m_products.bf16() ? "bf16" : "TF32"); }

  // What a continuation's one-row products read (fast/half_weights.hpp): bf16 copies of the
  // product weights, made when it starts (the default: half the bytes a token, the bound of
  // decoding), or the float weights themselves. Prefill and training always read the floats.
  using DecodeWeights = fast_parts::DecodeWeights;
  void setDecodeWeights(DecodeWeights weights) { m_decodeWeights.set(weights); }
  // bf16 copies of w's product weights (each block's four and the tied lm head), which one-row
  // products read in place of the floats while the returned object lives.
  using HalfWeights = fast_parts::HalfWeights;
  template <class Weights>
  osprey::Result<std::unique_ptr<HalfWeights>> halveWeights(const Weights& w);

 private:
  // The layers' helpers, defined beside the layers that use them.
  //
  // out (N, OC) = x · op(w) + bias (+ addend (N, OC) where given): the bias and the addend in
  // cuBLASLt's epilogue, or (where it has no algorithm) written first and the product added onto
  // them.
  template <class E>
  osprey::Result<Buffer> linearProduct(osprey::OperandOf<E> x, osprey::OperandOf<E> w, const Buffer& bias,
                                       osprey::Index N, osprey::Index IC, osprey::Index OC,
                                       const Buffer* addend = nullptr);
  // Both LayerNorm backwards: dx = dresid + the LayerNorm's dx where dresid is given.
  osprey::Result<LayerNormGrads<FastHandler>> layernormGradients(const Buffer* dresid, const Buffer& dout,
                                                                 const Buffer& x, const Buffer& w, const Buffer& mean,
                                                                 const Buffer& rstd, osprey::Index N, osprey::Index C);
  // A buffer as a product's operand of element type E, its elements followed by zeros up to
  // `length` (0: no zeros): for bf16 its twin; for float the buffer itself, or a padded copy that
  // `copy` holds for as long as the product may read it.
  template <class E>
  struct Held {
    const E* data;
    Buffer copy;
  };
  template <class E>
  osprey::Result<Held<E>> operandOf(const Buffer& b, osprey::Index length = 0);
  // out (N, OC) = x · w + bias stored as bf16: the bf16 product writes out's twin, the bias rounded
  // to bf16 (cuBLASLt adds a bf16 output's bias in its own type), and out's floats, made when
  // something reads them, are the twin's values. Nothing where cuBLASLt has no algorithm for it.
  osprey::Result<std::optional<Buffer>> halfProduct(const Buffer& x, const Buffer& w, const Buffer& bias,
                                                    osprey::Index N, osprey::Index IC, osprey::Index OC);
  // n floats stored as bf16: write(twin) launches the bf16-output product into the twin (false:
  // cuBLASLt has no algorithm for it, and nothing is made).
  template <class Write>
  osprey::Result<std::optional<Buffer>> storedProduct(osprey::Index n, Write write);
  // matmulBackward, with dx stored as bf16 (storedProduct) where dxStored and bf16 products.
  osprey::Result<MatmulGrads<FastHandler>> matmulGradients(const Buffer& dout, const Buffer& x, const Buffer& w,
                                                           osprey::Index N, osprey::Index IC, osprey::Index OC,
                                                           bool dxStored);
  // Whether outputs may be stored as bf16 now: bf16 products, deferred floats on, not recording.
  bool storesHalves() const { return m_products.bf16() && m_deferredFloats.on() && !m_recorder.recording(); }
  // b as the flash kernels read it for products of element type E (attention_layers.hpp).
  template <class E>
  osprey::Result<fast_kernels::TileSource> tilesOf(const Buffer& b);
  // A kernel whose output feeds a linear layer writes the twin beside it: write(twin) launches it
  // with room for out's twin (null with TF32 products: no twin), which is then kept as out's.
  template <class Write>
  osprey::Result<void> withTwin(const Buffer& out, Write write);
  // An output of n floats that this handler's layers read only as its twin (the LayerNorms' and
  // GELU's outputs, GELU's and attention's input gradients): launch(stream, floats, twin) writes
  // the floats and the twin where each is not null. With bf16 products the launch writes the twin
  // alone, and the floats are a buffer made later (fast/deferred_floats.hpp): allocated and written
  // by the same launch without the twin the first time something reads them, the same kernel on
  // the same inputs (which `launch` holds by value), so the same floats. With TF32 products, with
  // deferred floats off or while a decoding step records, both at once.
  template <class Launch>
  osprey::Result<Buffer> twinOnly(osprey::Index n, Launch launch);
  // x (N, IC), w (IC, OC) and bias (OC), as matmulForward reads them.
  osprey::Result<void> checkMatmul(const Buffer& x, const Buffer& w, const Buffer& bias, osprey::Index N,
                                   osprey::Index IC, osprey::Index OC);
  // geluBackward over N rows of `width` with the column sums of its output kept
  // (fast/column_sums.hpp): the fc layer's dout and its bias gradient in one pass
  // (fast_kernels::geluBackwardSummed); geluBackward alone where the rows do not fit that kernel.
  osprey::Result<Buffer> geluBackwardSummed(const Buffer& dout, const Buffer& x, osprey::Index N,
                                            osprey::Index width);
  // y (OC) = then(o, x · wTᵀ[o] + bias[o]) for one row x (IC), by linearRow; bias may be null.
  // The caller has checked the shapes. Reads wT's bf16 copy where one is in use (halfOf).
  template <class Then, class Row = fast_kernels::RowAsIs>
  osprey::Result<Buffer> oneRow(const Buffer& x, const Buffer& wT, const float* bias, osprey::Index IC,
                                osprey::Index OC, Then then, Row row = {});
  static constexpr osprey::Index kMaxNormalisedRow = 12 * 1024;  // floats of shared memory per block
  // w's bf16 twin while bf16 weight copies are in use (halveWeights made it), or null.
  const __nv_bfloat16* halfOf(const Buffer& w) const;
  // normLinear and normLinearGelu: one row through oneRow with the LayerNorm inside and `then`
  // after; more rows: layernormForward, then `layer` (linear or linearGelu) on its output.
  template <class Then, class Layer>
  osprey::Result<Buffer> normalisedRow(const Buffer& x, const Buffer& lnWeight, const Buffer& lnBias,
                                       const Buffer& wT, const Buffer& bias, osprey::Index N, osprey::Index IC,
                                       osprey::Index OC, Then then, Layer layer);
  static fast_kernels::RowNormalised normalised(const Buffer& lnWeight, const Buffer& lnBias);
  // Attention of qkvRow's query against `held` cached positions (attendOneRow). With a device-side
  // position (a recorded step) the kernel first appends the row's key and value and attends over
  // one position more: the position's own, read on the device.
  osprey::Result<Buffer> attendRow(const char* layer, const Buffer& qkvRow, const Buffer& keys, const Buffer& values,
                                   osprey::Index held, osprey::Index C, osprey::Index NH,
                                   const int* position = nullptr);
  // x (N, IC), wT (OC, IC) and bias (OC), as a linear layer reads them.
  osprey::Result<void> checkLinear(const Buffer& x, const Buffer& wT, const Buffer& bias, osprey::Index N,
                                   osprey::Index IC, osprey::Index OC);
  // dst (rows, width), rows ldDst apart: src (rows, cols; rows ldSrc apart), then zeros to `width`
  // (width 0: cols).
  osprey::Result<void> copyRows(float* dst, osprey::Index ldDst, const float* src, osprey::Index ldSrc,
                                osprey::Index rows, osprey::Index cols, osprey::Index width = 0);
  // headLoss' operands: z (N, C), wte (V, C), targets (N) as token ids below V; V and its padded
  // width as the kernels take them, and the targets as checked ids.
  struct HeadLossShape {
    int V = 0, Vp = 0;
    Buffer ids;
  };
  // How many floats headLoss's probabilities take: N·Vp, or half of that as bf16 pairs.
  static osprey::Index probsLength(bool halves, osprey::Index N, osprey::Index Vp) {
    return halves ? (N * Vp + 1) / 2 : N * Vp;
  }
  osprey::Result<HeadLossShape> checkHeadLoss(const char* layer, const Buffer& z, const Buffer& wte,
                                              const Buffer& targets, osprey::Index N, osprey::Index C,
                                              osprey::Index V);
  // Each token's rows, sorted (fast/token_sums.hpp), with the device memory that holds them.
  struct TokenRows {
    osprey::GpuBuffer<osprey::CudaDevice, int> ints;
    osprey::GpuBuffer<osprey::CudaDevice, unsigned char> scratch;
    osprey::GpuBuffer<osprey::CudaDevice, float> partials;  // the token sums' segments (C wide)
    fast_kernels::TokenRuns runs;
  };
  osprey::Result<TokenRows> tokenRows(const Buffer& ids, osprey::Index N, osprey::Index V, osprey::Index C);
  // Both embedding backwards: dwteBase (or nothing) plus the gathered sums.
  osprey::Result<EncoderGrads<FastHandler>> encoderGradients(const Buffer* dwteBase, const Buffer& dout,
                                                             const Buffer& tokens, osprey::Index N, osprey::Index T,
                                                             osprey::Index C, osprey::Index V, osprey::Index maxT,
                                                             osprey::Index posOffset);
  // The lm head over V padded to Vp = fast_detail::paddedWidth(V) (cuBLAS's aligned kernels):
  // x (N, IC) · wtᵀ into rows Vp wide (the last Vp - V columns 0); and its backward from a
  // gradient in that layout, dwt the first OC rows of a (Vp, IC) product.
  osprey::Result<Buffer> paddedTransposedProduct(const Buffer& x, const Buffer& wt, osprey::Index N, osprey::Index IC,
                                                 osprey::Index OC);
  // `halves`: doutWide's values already as bf16 (headLoss's probabilities), read by bf16 products
  // in place of doutWide.
  osprey::Result<MatmulTransposedGrads<FastHandler>> paddedTransposedGrads(const Buffer& doutWide, const Buffer& x,
                                                                           const Buffer& wt, osprey::Index N,
                                                                           osprey::Index IC, osprey::Index OC,
                                                                           const __nv_bfloat16* halves = nullptr);
  // table (N, V) and targets (N) as a cross-entropy layer reads them, every target an index in
  // [0, V) (a bad one is the reference's "index out of range" fault); V as the kernels take it.
  osprey::Result<int> checkCrossEntropy(const char* layer, const Buffer& table, const char* name,
                                        const Buffer& targets, osprey::Index N, osprey::Index V);
  // fast_kernels::crossEntropyForward over N rows ld apart, each row's first groups kept in
  // shared memory for its three passes (as many as a block's opt-in shared memory holds).
  osprey::Result<void> crossEntropyRows(float* probs, float* losses, const float* logits, const float* targets,
                                        osprey::Index N, int V, int ld, __nv_bfloat16* halves);
  // body over n elements by fast_kernels::byFoursKernel (AdamW, GELU): four at a time where
  // body.aligned().
  template <class Body>
  static osprey::Result<void> byFours(cudaStream_t stream, int multiprocessors, const char* launch, Body body,
                                      osprey::Index n);
  // n ones, kept for the bias gradients' column sums (grown when a larger n is asked for).
  osprey::Result<const float*> ones(osprey::Index n);

  // The parts.
  fast_parts::DeferredFloats m_deferredFloats;
  fast_parts::Bf16Twins m_twins;
  fast_parts::ColumnSums m_columnSums;
  fast_parts::ProductChoice m_products;
  fast_parts::Occupancy m_occupancy;
  Buffer m_ones;
  fast_parts::DecodeRecorder m_recorder;
  fast_parts::DecodeWeightCopies m_decodeWeights;
};

OSPREY_ASSERT_HANDLER(FastHandler, "fast (gpt2)");

}  // namespace gpt2

// The members' definitions, one file per family of layers (each a part of this header, which
// includes it after the class: the macro says so to a unit that includes one alone).
#define OSPREY_GPT2_FAST_HANDLER_PARTS 1
#include "gpt2/fast/twin_use.hpp"
#include "gpt2/fast/linear_layers.hpp"
#include "gpt2/fast/attention_layers.hpp"
#include "gpt2/fast/row_layers.hpp"
#include "gpt2/fast/encoder_layers.hpp"
#include "gpt2/fast/head_loss_layers.hpp"
#include "gpt2/fast/decode_layers.hpp"
#undef OSPREY_GPT2_FAST_HANDLER_PARTS
