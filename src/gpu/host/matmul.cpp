// The host device's exact matMul: packed panels, register tiles, SIMD across columns.
//
// Contract (DESIGN.md §4): out[i][j] = fma(a[i][K-1], b[K-1][j], ... fma(a[i][0], b[0][j], +0.0)),
// one fused multiply-add per term, k ascending. Tiling and SIMD only ever group *different*
// outputs: a vector lane is one output, and its chain of fused multiply-adds is exactly the lists
// handler's std::fma chain. The kernels use the CPU's FMA instructions (AVX-512F, or AVX2 with
// FMA); a CPU with neither runs the portable kernel, whose std::fma is the C library's correctly
// rounded one (the same double, more slowly). The file is built with -ffp-contract=off, so the
// only fused operations are the ones written here.
//
// Layout: b is packed per (column tile, k block) into a depth x NR panel (columns past `cols`
// padded with zeros and never stored); a is packed once into MR-row strips, k-major, so the
// micro-kernel reads both operands contiguously. An operand held transposed (osprey/transposed.hpp)
// is read as it lies while it is packed, so the product of a held layout costs no transposing copy
// and, the packed operands being the same, gives the same doubles.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <immintrin.h>
#include <omp.h>

#include "osprey/gpu/host/device.hpp"

namespace osprey {
namespace {

constexpr Index NR = 16;   // columns per tile: two AVX-512 vectors, four AVX2 vectors
constexpr Index MR = 8;    // rows per strip of packed a
constexpr Index KC = 256;  // k block: a panel of b (256 x 16 doubles = 32 KiB) stays in L1/L2

using Tile = double[MR][NR];

typedef double v8d __attribute__((vector_size(64)));
typedef double v4d __attribute__((vector_size(32)));

// x in every lane, by a plain broadcast. (Writing `v8d{} + x` costs a real vector add per use:
// with -ffp-contract=off and no fast-math the compiler must keep 0.0 + x, since it turns -0.0
// into +0.0; that add was a fifth of the micro-kernel's arithmetic.)
__attribute__((target("avx512f"))) inline v8d broadcast8(double x) { return (v8d)_mm512_set1_pd(x); }
__attribute__((target("avx2,fma"))) inline v4d broadcast4(double x) { return (v4d)_mm256_set1_pd(x); }

// acc[r][:] = fma(ap[k][r], bp[k][:], acc[r][:]) for k in [0, depth), rows r < R.
template <int R>
__attribute__((target("avx512f"))) void tileAvx512(Tile& acc, const double* ap, const double* bp,
                                                    Index depth) {
  v8d c[R][2];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) std::memcpy(&c[r][v], &acc[r][v * 8], sizeof(v8d));
  for (Index k = 0; k < depth; ++k) {
    v8d b0, b1;
    std::memcpy(&b0, bp + k * NR, sizeof(v8d));
    std::memcpy(&b1, bp + k * NR + 8, sizeof(v8d));
    for (int r = 0; r < R; ++r) {
      const v8d ar = broadcast8(ap[k * MR + r]);
      c[r][0] = (v8d)_mm512_fmadd_pd((__m512d)ar, (__m512d)b0, (__m512d)c[r][0]);
      c[r][1] = (v8d)_mm512_fmadd_pd((__m512d)ar, (__m512d)b1, (__m512d)c[r][1]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) std::memcpy(&acc[r][v * 8], &c[r][v], sizeof(v8d));
}

template <int R>
__attribute__((target("avx2,fma"))) void tileAvx2(Tile& acc, const double* ap, const double* bp, Index depth) {
  for (int r0 = 0; r0 < R; r0 += 2) {  // 2 rows x 4 vectors = 8 accumulators of the 16 registers
    const int rows = std::min(2, R - r0);
    v4d c[2][4];
    for (int r = 0; r < rows; ++r)
      for (int v = 0; v < 4; ++v) std::memcpy(&c[r][v], &acc[r0 + r][v * 4], sizeof(v4d));
    for (Index k = 0; k < depth; ++k) {
      v4d b[4];
      for (int v = 0; v < 4; ++v) std::memcpy(&b[v], bp + k * NR + v * 4, sizeof(v4d));
      for (int r = 0; r < rows; ++r) {
        const v4d ar = broadcast4(ap[k * MR + r0 + r]);
        for (int v = 0; v < 4; ++v) c[r][v] = (v4d)_mm256_fmadd_pd((__m256d)ar, (__m256d)b[v], (__m256d)c[r][v]);
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int v = 0; v < 4; ++v) std::memcpy(&acc[r0 + r][v * 4], &c[r][v], sizeof(v4d));
  }
}

template <int R>
void tilePortable(Tile& acc, const double* ap, const double* bp, Index depth) {
  for (Index k = 0; k < depth; ++k)
    for (int r = 0; r < R; ++r) {
      const double ar = ap[k * MR + r];
      for (Index j = 0; j < NR; ++j) acc[r][j] = std::fma(ar, bp[k * NR + j], acc[r][j]);
    }
}

using Isa = HostMatMulIsa;

// The best kernel this CPU runs.
Isa detectIsa() {
  static const Isa isa = hostMatMulIsaAvailable(Isa::Avx512) ? Isa::Avx512
                         : hostMatMulIsaAvailable(Isa::Avx2) ? Isa::Avx2
                                                             : Isa::Portable;
  return isa;
}

template <int R>
void tileR(Isa isa, Tile& acc, const double* ap, const double* bp, Index depth) {
  switch (isa) {
    case Isa::Avx512: return tileAvx512<R>(acc, ap, bp, depth);
    case Isa::Avx2: return tileAvx2<R>(acc, ap, bp, depth);
    case Isa::Portable: return tilePortable<R>(acc, ap, bp, depth);
  }
}

// One strip of `rows` (<= MR) rows: dispatch to the kernel specialised for that row count.
void tile(Isa isa, Index rows, Tile& acc, const double* ap, const double* bp, Index depth) {
  switch (rows) {
    case 8: return tileR<8>(isa, acc, ap, bp, depth);
    case 7: return tileR<7>(isa, acc, ap, bp, depth);
    case 6: return tileR<6>(isa, acc, ap, bp, depth);
    case 5: return tileR<5>(isa, acc, ap, bp, depth);
    case 4: return tileR<4>(isa, acc, ap, bp, depth);
    case 3: return tileR<3>(isa, acc, ap, bp, depth);
    case 2: return tileR<2>(isa, acc, ap, bp, depth);
    default: return tileR<1>(isa, acc, ap, bp, depth);
  }
}

}  // namespace

// Few columns (a matrix times one or two vectors, as in one-token decoding with transposed
// weights): a 16-wide column tile would be mostly padding, so each thread takes blocks of rows
// and runs eight independent k-ordered chains, one per row, reading a once.
void narrowMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner, Index cols,
                  Transposed layout) {
  constexpr Index kRowsAtOnce = 8;
  // Element (i, k) of a and (k, j) of b, by strides: a held transposed steps `rows` a k, b held
  // transposed steps `inner` a column.
  const Index aRow = layout == Transposed::A ? 1 : inner, aK = layout == Transposed::A ? rows : 1;
  const Index bK = layout == Transposed::B ? 1 : cols, bCol = layout == Transposed::B ? inner : 1;
#pragma omp parallel for schedule(static) if (rows * inner > 32768)
  for (Index i0 = 0; i0 < rows; i0 += kRowsAtOnce) {
    const Index height = std::min(kRowsAtOnce, rows - i0);
    for (Index j = 0; j < cols; ++j) {
      double acc[kRowsAtOnce] = {};
      for (Index k = 0; k < inner; ++k) {
        const double bk = b[k * bK + j * bCol];
        for (Index r = 0; r < height; ++r) acc[r] = std::fma(a[(i0 + r) * aRow + k * aK], bk, acc[r]);
      }
      for (Index r = 0; r < height; ++r) out[(i0 + r) * cols + j] = acc[r];
    }
  }
}

// AVX-512F has its fused multiply-add; AVX2's comes with the separate FMA extension.
bool hostMatMulIsaAvailable(HostMatMulIsa isa) {
  switch (isa) {
    case HostMatMulIsa::Avx512: return __builtin_cpu_supports("avx512f");
    case HostMatMulIsa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case HostMatMulIsa::Portable: return true;
  }
  return false;
}

void hostMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner, Index cols,
                Transposed layout) {
  hostMatMulWith(detectIsa(), out, a, b, rows, inner, cols, layout);
}

void hostMatMulWith(HostMatMulIsa isa, Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner,
                    Index cols, Transposed layout) {
  if (rows == 0 || cols == 0) return;
  if (cols <= 2) return narrowMatMul(out, a, b, rows, inner, cols, layout);
  const Index strips = (rows + MR - 1) / MR;
  const Index colTiles = (cols + NR - 1) / NR;
  const Index kBlocks = std::max<Index>((inner + KC - 1) / KC, 1);
  // A product under about a million multiply-adds (an attention head's 64 x 64 x 64) takes tens of
  // microseconds on one thread, no more than starting and joining a team twice.
  const bool parallel = rows * cols * std::max<Index>(inner, 1) > (Index{1} << 20);

  // a packed as strips of MR rows, k-major: packedA[s][k][r] = a[s*MR + r][k] (0 past `rows`);
  // held transposed, a[s*MR + r][k] lies at a[k * rows + s*MR + r].
  // The buffer is the calling thread's and only grows: the lm head packs its 50257 x 768 weight
  // (295 MiB) per product, and fresh pages every call cost more system time than the packing
  // itself. It is left uninitialised (the packing loop writes every element), so a new buffer's
  // pages are first touched by the threads that pack them, not zero-filled by this one.
  thread_local std::unique_ptr<double[]> packedStorage;
  thread_local std::size_t packedCapacity = 0;
  const auto packedSize = static_cast<std::size_t>(strips * MR * std::max<Index>(inner, 1));
  if (packedCapacity < packedSize) {
    packedStorage.reset();
    packedStorage.reset(new double[packedSize]);
    packedCapacity = packedSize;
  }
  double* const packedA = packedStorage.get();
#pragma omp parallel for schedule(static) if (parallel)
  for (Index s = 0; s < strips; ++s) {
    double* dst = packedA + s * MR * inner;
    const Index height = std::min(MR, rows - s * MR);
    if (layout == Transposed::A) {
      for (Index k = 0; k < inner; ++k) {
        const double* src = a + k * rows + s * MR;
        for (Index r = 0; r < MR; ++r) dst[k * MR + r] = r < height ? src[r] : 0.0;
      }
    } else {
      // In k blocks of KC, so the strip's block being written (KC x MR doubles, 16 KiB) stays in L1
      // while its eight rows are read: a whole strip of the lm head's backward (k = 50257, 3.2 MB)
      // would otherwise be written eight times over, once per row, from beyond the cache.
      for (Index k0 = 0; k0 < inner; k0 += KC) {
        const Index k1 = std::min(inner, k0 + KC);
        for (Index r = 0; r < MR; ++r) {
          if (r < height) {
            const double* src = a + (s * MR + r) * inner;
            for (Index k = k0; k < k1; ++k) dst[k * MR + r] = src[k];
          } else {
            for (Index k = k0; k < k1; ++k) dst[k * MR + r] = 0.0;
          }
        }
      }
    }
  }

  // Column tiles are independent outputs: each thread takes whole tiles. The loops run row block
  // (MC rows), then k block (KC), then column tiles, so one block of packed a (MC x KC doubles,
  // 512 KiB) serves every column tile while it sits in cache: with a long k (the lm head's
  // backward has k = 50257) sweeping all of packed a once per column tile would stream it from
  // memory cols/NR times. Each tile packs its panel of b (KC x NR, in L1) and runs the strips.
  constexpr Index MC = 256;
  const Index rowBlocks = (rows + MC - 1) / MC;
#pragma omp parallel if (parallel)
  {
    std::vector<double> panel(static_cast<std::size_t>(KC * NR));
    alignas(64) Tile acc;
    for (Index rb = 0; rb < rowBlocks; ++rb) {
      const Index s0 = rb * (MC / MR), s1 = std::min(strips, (rb + 1) * (MC / MR));
      for (Index kb = 0; kb < kBlocks; ++kb) {
        const Index k0 = kb * KC, depth = std::min(KC, inner - k0);
        // The barrier at the end of each `omp for` keeps the k blocks of one output in order.
#pragma omp for schedule(dynamic, 4)
        for (Index ct = 0; ct < colTiles; ++ct) {
          const Index j0 = ct * NR, width = std::min(NR, cols - j0);
          if (layout == Transposed::B) {  // column j of the panel is row j0 + j of the held b
            for (Index k = 0; k < depth; ++k) std::fill(panel.data() + k * NR + width, panel.data() + (k + 1) * NR, 0.0);
            for (Index j = 0; j < width; ++j) {
              const double* src = b + (j0 + j) * inner + k0;
              for (Index k = 0; k < depth; ++k) panel[static_cast<std::size_t>(k * NR + j)] = src[k];
            }
          } else {
            for (Index k = 0; k < depth; ++k) {
              double* row = panel.data() + k * NR;
              std::memcpy(row, b + (k0 + k) * cols + j0, sizeof(double) * width);
              std::fill(row + width, row + NR, 0.0);
            }
          }
          for (Index s = s0; s < s1; ++s) {
            const Index i0 = s * MR, height = std::min(MR, rows - i0);
            // A partial sum stored to `out` and reloaded is the same double: resuming the chain
            // at k0 keeps every output's k order intact.
            for (Index r = 0; r < height; ++r)
              for (Index j = 0; j < NR; ++j)
                acc[r][j] = (kb == 0 || j >= width) ? 0.0 : out[(i0 + r) * cols + j0 + j];
            tile(isa, height, acc, packedA + s * MR * inner + k0 * MR, panel.data(), depth);
            for (Index r = 0; r < height; ++r)
              std::memcpy(out + (i0 + r) * cols + j0, acc[r], sizeof(double) * width);
          }
        }
      }
    }
  }
}

}  // namespace osprey
