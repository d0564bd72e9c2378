// The fast handler: the effect answered on the cuda device in float storage, with tensor-core
// products (DESIGN.md §4 "Fast"). nvcc translation units only, like cuda.hpp.
//
// What it changes against the exact gpu/cuda handler, and nothing else:
//   * storage: every buffer holds floats: Fast is Gpu<CudaDevice, float> (handler.hpp), whose
//     build, get, zipWith, reduce, indexOf, fromList and load it keeps. Kernels are the model's
//     own kernels; they still read each element as a Scalar through ViewOf<float>, compute in
//     double, and each stored result is rounded to float once.
//   * matMul / matMulBatched: cuBLAS on the TF32 tensor cores with float accumulation
//     (CUBLAS_COMPUTE_32F_FAST_TF32): inputs are rounded to TF32 (11 significant bits) inside the
//     product; the sums are float sums in cuBLAS's order. (CUBLAS_COMPUTE_32F_FAST_16BF on float
//     operands measured the same kernels, errors and times on the H200.) product() and
//     productPlusBias() also take bf16 operands (HalfOperand: the tensor cores' bf16 rate, float
//     sums), which a caller rounds itself: the GPT-2 layers keep bf16 twins of their float
//     buffers for them (gpt2/fast/bf16_twins.hpp).
//   * row folds whose combine is Regroupable (effect.hpp: +, max): a tree over a block per row
//     instead of one thread walking the row. Any other combine keeps the device's ordered fold.
//   * reduce and indexOf keep their contract (in element order; first hit) on float elements.
//
// So fast differs from exact only by float rounding of what is stored, TF32 rounding inside
// products, and the grouping of row sums. docs/FAST.md gives the tolerances that follow and the
// tests that enforce them on the H200. The model's derived layers may be answered by fused
// kernels on top of this handler (gpt2/fast/); the library handler answers none.
//
// Streams: cuBLAS runs on the legacy default stream, the stream every other launch of the cuda
// device uses, so products are ordered with the kernels around them without any synchronisation.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/fast.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "osprey/effect.hpp"
#include "osprey/gpu/cuda/cublas_check.hpp"
#include "osprey/gpu/cuda/device.hpp"
#include "osprey/gpu/handler.hpp"
#include "osprey/gpu/cuda/lt_choices.hpp"
#include "osprey/gpu/surface.hpp"
#include "osprey/shape_check.hpp"

namespace osprey {

// cuBLAS and cuBLASLt handles, created once per Fast handler and destroyed with the last copy.
class CublasHandle {
 public:
  static Result<std::shared_ptr<CublasHandle>> create() {
    cublasHandle_t h = nullptr;
    OSPREY_CUBLAS_CHECK(cublasCreate(&h), "creating the fast handler's cuBLAS handle");
    cublasLtHandle_t lt = nullptr;
    if (const cublasStatus_t made = cublasLtCreate(&lt); made != CUBLAS_STATUS_SUCCESS) {
      (void)cublasDestroy(h);
      return cublas::failure(made, "cublasLtCreate(&lt)", __FILE__, __LINE__, "creating the fast handler's cuBLASLt handle");
    }
    auto owned = std::shared_ptr<CublasHandle>(new CublasHandle(h, lt));
    // Default math mode: each call's compute type alone decides TF32 or full float (Precision).
    // Each call goes to the device's stream (Fast::blasOnStream).
    OSPREY_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "choosing cuBLAS's default math mode");
    return owned;
  }
  ~CublasHandle() {
    (void)cublasLtDestroy(m_lt);
    (void)cublasDestroy(m_handle);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return m_handle; }
  cublasLtHandle_t lt() const { return m_lt; }

 private:
  CublasHandle(cublasHandle_t h, cublasLtHandle_t lt) : m_handle(h), m_lt(lt) {}
  cublasHandle_t m_handle;
  cublasLtHandle_t m_lt;
};

// A cuBLASLt descriptor, destroyed with its owner (Destroy is its cublasLt…Destroy function).
template <class T, cublasStatus_t (*Destroy)(T)>
struct LtOwned {
  T value = nullptr;
  LtOwned() = default;
  LtOwned(const LtOwned&) = delete;
  LtOwned& operator=(const LtOwned&) = delete;
  ~LtOwned() {
    if (value) (void)Destroy(value);
  }
};

// What a product's multiplications see: TensorCores (inputs rounded to TF32, 11 significant
// bits; the layers' products) or Float (full float inputs; sums that must not lose bits, such as a
// bias gradient's column sums). Both add in float.
enum class Precision { TensorCores, Float };

// A row-major operand of a product: its elements (float, or bf16 for the bf16 products), whether
// the product reads it transposed, and where a strided operand's rows and batch members lie (0:
// packed one after another).
template <class E>
struct OperandOf {
  const E* data;
  bool transposed = false;
  Index ld = 0;      // elements from one stored row to the next
  Index stride = 0;  // elements from one product's operand to the next product's

  // The leading dimension of a (rows x cols) operand of the product: ld, or its packed stored
  // width (cols, or rows where it is stored transposed).
  Index leading(Index rows, Index cols) const { return ld ? ld : transposed ? rows : cols; }
};
using Operand = OperandOf<float>;
using HalfOperand = OperandOf<__nv_bfloat16>;

// cuBLAS's name for an operand's element type.
template <class E>
constexpr cudaDataType_t cudaTypeOf() {
  static_assert(std::is_same_v<E, float> || std::is_same_v<E, __nv_bfloat16>, "float or bf16 operands");
  return std::is_same_v<E, float> ? CUDA_R_32F : CUDA_R_16BF;
}

class Fast : public Gpu<CudaDevice, float> {
 public:
  // The cuda device OSPREY_CUDA_DEVICE names, with a cuBLAS handle; an Error when there is no GPU.
  static Result<Fast> open() {
    auto device = OSPREY_TRY(CudaDevice::open());
    return Fast(device, OSPREY_TRY(CublasHandle::create()));
  }
  Fast(std::shared_ptr<CudaDevice> device, std::shared_ptr<CublasHandle> blas)
      : Gpu(std::move(device)), m_blas(std::move(blas)), m_choices(std::make_shared<LtChoices>()) {}

  // build, get, length, zipWith, reduce, indexOf, fromList and load: Gpu's own, on float storage.

  // Row-major (rows x inner) * (inner x cols) on the tensor cores (TF32 inputs, float sums).
  Result<Buffer> matMul(const Buffer& a, const Buffer& b, Index rows, Index inner, Index cols) {
    OSPREY_CHECK(checkMatMulShapes(a.size(), b.size(), rows, inner, cols));
    auto out = OSPREY_TRY(allocate(rows * cols));
    OSPREY_CHECK(product(out.data(), Operand{a.data()}, Operand{b.data()}, rows, inner, cols));
    return out;
  }
  // `batch` products of one shape stored one after another (gpt2/layers/attention_heads.hpp).
  Result<Buffer> matMulBatched(const Buffer& a, const Buffer& b, Index batch, Index rows, Index inner, Index cols) {
    const Index n = OSPREY_TRY(checkBatchedMatMulShapes(a.size(), b.size(), batch, rows, inner, cols));
    auto out = OSPREY_TRY(allocate(n));
    OSPREY_CHECK(product(out.data(), Operand{a.data()}, Operand{b.data()}, rows, inner, cols, 0.0f, batch));
    return out;
  }

  // out (rows x cols) = op(a) (rows x inner) * op(b) (inner x cols) + beta * out, row-major, for
  // `batch` such products, the outputs one after another: the one entry to cuBLAS, for this handler
  // and for the fused layers built on it. op(x) is x, or x stored (cols x inner) / (inner x rows)
  // and read transposed. The outputs may be strided too: row r of product p at out + p·strideOut +
  // r·ldOut (0: packed). cuBLAS is column-major, and a row-major matrix read column-major is its
  // transpose, so the call computes outᵀ = op(b)ᵀ · op(a)ᵀ.
  Result<void> product(float* out, Operand a, Operand b, Index rows, Index inner, Index cols, float beta = 0.0f,
                       Index batch = 1, Precision precision = Precision::TensorCores, Index ldOut = 0, Index strideOut = 0) {
    return productOf(out, a, b, rows, inner, cols, beta, batch, precision, ldOut, strideOut);
  }
  // The same on bf16 operands (8 significant bits, rounded so by the caller): the tensor cores'
  // bf16 products, summed in float (CUBLAS_COMPUTE_32F). A product of two bf16 values is exact in
  // float, so both precisions are the same here; the parameter keeps one signature for both kinds.
  // A single product into a fresh packed output goes to cuBLASLt, whose algorithm is chosen by
  // timing (osprey/gpu/cuda/lt_choices.hpp); the rest to cuBLAS.
  Result<void> product(float* out, HalfOperand a, HalfOperand b, Index rows, Index inner, Index cols,
                       float beta = 0.0f, Index batch = 1, Precision precision = Precision::TensorCores,
                       Index ldOut = 0, Index strideOut = 0) {
    const bool single = batch == 1 && beta == 0.0f && (ldOut == 0 || ldOut == cols) && rows > 0 && inner > 0 &&
                        cols > 0 && rows <= INT_MAX && inner <= INT_MAX && cols <= INT_MAX;
    if (single && OSPREY_TRY(epilogueProduct(out, a, b, rows, inner, cols, CUBLASLT_EPILOGUE_DEFAULT,
                                             static_cast<float*>(nullptr), nullptr)))
      return {};
    return productOf(out, a, b, rows, inner, cols, beta, batch, precision, ldOut, strideOut);
  }

  // out (rows x cols) = op(a) · op(b) + bias (cols) on every row, the bias added in the product's
  // own epilogue (cuBLASLt, CUBLASLT_EPILOGUE_BIAS): no pass that writes the bias first and no read
  // of it back. Packed output; a and b as in product(), float (TF32 products) or bf16. Where
  // `addend` (rows x cols, packed) is given, it is added in the same epilogue (cuBLASLt's C with
  // beta 1): a residual sum without a pass of its own. False when cuBLASLt has no algorithm for
  // the shape (the caller then writes the bias, and the addend, and uses product() with beta 1);
  // an Error when a call fails.
  template <class E>
  Result<bool> productPlusBias(float* out, OperandOf<E> a, OperandOf<E> b, Index rows, Index inner, Index cols,
                               const float* bias, const float* addend = nullptr) {
    return epilogueProduct(out, a, b, rows, inner, cols, CUBLASLT_EPILOGUE_BIAS, const_cast<float*>(bias), addend);
  }
  // The same with bf16 operands into a bf16 out: each element the float sum plus the bias (bf16,
  // cuBLASLt's bias for a bf16 output being of the output's type), rounded to bf16 once. False
  // when cuBLASLt has no algorithm for it.
  Result<bool> productPlusBiasToHalves(__nv_bfloat16* out, HalfOperand a, HalfOperand b, Index rows, Index inner,
                                       Index cols, const __nv_bfloat16* bias) {
    return epilogueProduct(out, a, b, rows, inner, cols, CUBLASLT_EPILOGUE_BIAS, const_cast<__nv_bfloat16*>(bias),
                           nullptr);
  }
  // out (rows x cols) = op(a) · op(b) from bf16 operands into a bf16 out, each element's float
  // sum rounded to bf16 once. False when cuBLASLt has no algorithm for it.
  Result<bool> productToHalves(__nv_bfloat16* out, HalfOperand a, HalfOperand b, Index rows, Index inner, Index cols) {
    return epilogueProduct(out, a, b, rows, inner, cols, CUBLASLT_EPILOGUE_DEFAULT,
                           static_cast<__nv_bfloat16*>(nullptr), nullptr);
  }

  // `batch` products of one shape whose operands and outputs lie anywhere: product p reads op(a)
  // at as[p] and op(b) at bs[p] and writes out at outs[p] (device arrays of pointers), each matrix
  // with rows ld elements apart. The one call for products that no single stride describes
  // (attention's heads of a (B, T, 3C) activation).
  Result<void> productsAt(float* const* outs, Index ldOut, const float* const* as, bool aTransposed, Index lda,
                          const float* const* bs, bool bTransposed, Index ldb, Index rows, Index inner, Index cols,
                          Index batch) {
    const auto label = [&] {
      return fmt::format("fast matMul of {} placed products ({} x {}) * ({} x {})", batch, rows, inner, inner, cols);
    };
    if (rows == 0 || cols == 0 || batch == 0) return {};
    for (Index d : {rows, inner, cols, batch, lda, ldb, ldOut})
      if (d < 1 || d > INT_MAX) return Error{label() + ": a dimension is outside cuBLAS's int range [1, 2^31)"};
    const float alpha = 1.0f, beta = 0.0f;
    OSPREY_CUBLAS_CHECK(
        cublasGemmBatchedEx(OSPREY_TRY(blasOnStream()), bTransposed ? CUBLAS_OP_T : CUBLAS_OP_N, aTransposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                            static_cast<int>(cols), static_cast<int>(rows), static_cast<int>(inner), &alpha,
                            reinterpret_cast<const void* const*>(bs), CUDA_R_32F, static_cast<int>(ldb),
                            reinterpret_cast<const void* const*>(as), CUDA_R_32F, static_cast<int>(lda), &beta,
                            reinterpret_cast<void* const*>(outs), CUDA_R_32F, static_cast<int>(ldOut),
                            static_cast<int>(batch), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
        label());
    if (m_device->checksEachLaunch()) return m_device->flush();
    return {};
  }

  // Row folds (gpt2/layers/fold_rows.hpp): a tree per row for a Regroupable combine (the fast
  // interpretation's grouping), else the device's ordered fold.
  template <class L, class T, class C, class F>
  Result<Buffer> foldRows(Index rows, L length, Scalar seed, bool fromFirst, T term, C combine, F finish) {
    auto out = OSPREY_TRY(allocate(rows));
    OSPREY_CHECK(m_device->template foldRows<Regroupable<C>>(out.data(), rows, length, seed, fromFirst, term, combine,
                                                              finish));
    return out;
  }

  std::string device() const { return deviceWith("TF32"); }

  // Whether cuBLASLt products time the heuristic's candidates for each new shape (the default) or
  // run its first candidate; both give the same bits (osprey/gpu/cuda/lt_choices.hpp). Shared by copies.
  void setProductTuning(bool on) { m_choices->setTuning(on); }
  // The product shapes chosen so far, and how many of them by timing.
  std::size_t productShapesChosen() const { return m_choices->chosen(); }
  std::size_t productShapesTimed() const { return m_choices->timed(); }

  // n floats, uninitialised: the output of a product or a fused kernel.
  Result<Buffer> allocate(Index n) { return gpuAllocate<float>(m_device, n); }

  // The stream the device's work goes to (CudaDevice::stream): fused kernels launch onto it.
  cudaStream_t stream() const { return m_device->stream(); }

 protected:
  // The device's name, with the kind of tensor-core product the handler's layers use.
  std::string deviceWith(const char* products) const {
    return fmt::format("fast {} (float storage, {} tensor-core products)", m_device->name(), products);
  }

 private:
  // One cuBLASLt product with an epilogue that reads or writes a vector of out's columns (the
  // bias, or the bias gradient; null: the plain product), and optionally an addend as C with beta
  // 1. Out, the vector and the addend are float, or (O bf16, bf16 operands) bf16. False when
  // cuBLASLt has no algorithm for it.
  template <class E, class O = float>
  Result<bool> epilogueProduct(O* out, OperandOf<E> a, OperandOf<E> b, Index rows, Index inner, Index cols,
                               cublasLtEpilogue_t epilogue, O* vector, const std::type_identity_t<O>* addend) {
    const auto label = [&] {
      return fmt::format("fast linear ({} x {}) * ({} x {}){}{}", rows, inner, inner, cols,
                         epilogue == CUBLASLT_EPILOGUE_BIAS ? " + bias" : "", addend ? " + addend" : "");
    };
    for (Index d : {rows, inner, cols})
      if (d < 1 || d > INT_MAX) return Error{label() + ": a dimension is outside [1, 2^31)"};
    const Index ldb = b.leading(inner, cols), lda = a.leading(rows, inner);
    const cublasOperation_t opB = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, opA = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const auto m = static_cast<std::uint64_t>(cols), n = static_cast<std::uint64_t>(rows), k = static_cast<std::uint64_t>(inner);
    constexpr cudaDataType_t type = cudaTypeOf<E>();
    LtOwned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc;
    OSPREY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.value, type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                : CUBLAS_COMPUTE_32F,
                                                 CUDA_R_32F),
                        label());
    constexpr cudaDataType_t outType = cudaTypeOf<O>(), vectorType = outType;
    OSPREY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof(opB)), label());
    OSPREY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof(opA)), label());
    OSPREY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
                        label());
    if (vector) {
      OSPREY_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector, sizeof(vector)), label());
      OSPREY_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc.value, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vectorType, sizeof(vectorType)),
          label());
    }
    // Column-major, as product(): outᵀ (cols x rows) = op(b)ᵀ · op(a)ᵀ.
    LtOwned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> layoutB, layoutA, layoutOut;
    OSPREY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layoutB.value, type, b.transposed ? k : m, b.transposed ? m : k,
                                                   static_cast<std::int64_t>(ldb)), label());
    OSPREY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layoutA.value, type, a.transposed ? n : k, a.transposed ? k : n,
                                                   static_cast<std::int64_t>(lda)), label());
    OSPREY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layoutOut.value, outType, m, n, static_cast<std::int64_t>(cols)),
                        label());
    float* workspace = OSPREY_TRY(ltWorkspace());
    LtOwned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> preference;
    OSPREY_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.value), label());
    const std::size_t workspaceBytes = kLtWorkspaceBytes;
    OSPREY_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.value, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspaceBytes, sizeof(workspaceBytes)),
                        label());
    const float alpha = 1.0f, beta = addend ? 1.0f : 0.0f;
    const auto run = [&](const cublasLtMatmulAlgo_t& algo) {
      return cublasLtMatmul(m_blas->lt(), desc.value, &alpha, b.data, layoutB.value, a.data, layoutA.value, &beta,
                            addend ? addend : out, layoutOut.value, out, layoutOut.value, &algo, workspace,
                            workspaceBytes, stream());
    };
    const LtChoices::Key key{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n), static_cast<std::int64_t>(k),
                             lda, ldb, opA, opB, type, outType, epilogue, addend != nullptr, vector != nullptr};
    const LtChoices::Product asked{m_blas->lt(), desc.value, layoutB.value, layoutA.value, layoutOut.value,
                                   layoutOut.value, preference.value, stream(), addend != out,
                                   static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)};
    const auto algo = OSPREY_TRY(m_choices->choose(key, asked, run));
    if (!algo) return false;
    OSPREY_CUBLAS_CHECK(run(*algo), label());
    if (m_device->checksEachLaunch()) OSPREY_CHECK(m_device->flush());
    return true;
  }

  // product() on float or bf16 operands.
  template <class E>
  Result<void> productOf(float* out, OperandOf<E> a, OperandOf<E> b, Index rows, Index inner, Index cols, float beta,
                         Index batch, Precision precision, Index ldOut, Index strideOut) {
    const auto label = [&] {
      return fmt::format("fast matMul of {} {}product{} ({} x {}){} * ({} x {}){}", batch,
                         std::is_same_v<E, float> ? "" : "bf16 ", batch == 1 ? "" : "s", rows, inner,
                         a.transposed ? "ᵀ-stored" : "", inner, cols, b.transposed ? "ᵀ-stored" : "");
    };
    if (rows == 0 || cols == 0 || batch == 0) return {};
    for (Index d : {rows, inner, cols, batch})
      if (d < 0 || d > INT_MAX) return Error{label() + ": a dimension is outside cuBLAS's int range"};
    if (inner == 0) {  // an empty sum: zeros (cuBLAS would leave beta * out)
      if (beta != 0.0f) return {};
      if (ldOut || strideOut) return Error{label() + ": an empty sum into a strided output is not supported"};
      OSPREY_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(batch * rows * cols) * sizeof(float), stream()),
                        label());
      return {};
    }
    const float alpha = 1.0f;
    const int m = static_cast<int>(cols), n = static_cast<int>(rows), k = static_cast<int>(inner);
    const cublasOperation_t opB = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opA = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const Index ldb = b.leading(inner, cols), lda = a.leading(rows, inner);
    if (ldb > INT_MAX || lda > INT_MAX) return Error{label() + ": a leading dimension is outside cuBLAS's int range"};
    const Index strideB = b.stride ? b.stride : inner * cols, strideA = a.stride ? a.stride : rows * inner;
    const Index ldc = ldOut ? ldOut : cols, strideC = strideOut ? strideOut : rows * cols;
    if (ldc > INT_MAX) return Error{label() + ": the output's leading dimension is outside cuBLAS's int range"};
    const cublasComputeType_t compute = std::is_same_v<E, float> && precision == Precision::TensorCores
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F;
    OSPREY_CUBLAS_CHECK(cublasGemmStridedBatchedEx(OSPREY_TRY(blasOnStream()), opB, opA, m, n, k, &alpha, b.data,
                                                   cudaTypeOf<E>(), static_cast<int>(ldb), strideB, a.data,
                                                   cudaTypeOf<E>(), static_cast<int>(lda), strideA, &beta, out,
                                                   CUDA_R_32F, static_cast<int>(ldc), strideC, static_cast<int>(batch),
                                                   compute, CUBLAS_GEMM_DEFAULT),
                        label());
    if (m_device->checksEachLaunch()) return m_device->flush();
    return {};
  }

  // The cuBLAS handle with its calls put on the device's stream.
  Result<cublasHandle_t> blasOnStream() {
    OSPREY_CUBLAS_CHECK(cublasSetStream(m_blas->get(), stream()), "putting cuBLAS on the device's stream");
    return m_blas->get();
  }

  // cuBLASLt's workspace, allocated on first use and kept with the handler's copies.
  static constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;
  Result<float*> ltWorkspace() {
    if (!m_ltWorkspace) {
      float* p = OSPREY_TRY(m_device->allocate<float>(static_cast<Index>(kLtWorkspaceBytes / sizeof(float))));
      auto device = m_device;
      m_ltWorkspace = std::shared_ptr<float>(p, [device](float* q) { device->release(q); });
    }
    return m_ltWorkspace.get();
  }

  std::shared_ptr<CublasHandle> m_blas;
  std::shared_ptr<LtChoices> m_choices;  // each product shape's algorithm, shared by copies
  std::shared_ptr<float> m_ltWorkspace;
};

OSPREY_ASSERT_HANDLER(Fast, "fast");

}  // namespace osprey
