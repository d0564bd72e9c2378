// The host device's exact matMul: blocked over rows and columns, vectorised across columns.
//
// Contract (DESIGN.md §4): out[i][j] = (((0.0 + a[i][0]*b[0][j]) + a[i][1]*b[1][j]) + ...), one
// rounding per multiply and per add, k ascending. Blocking and SIMD only ever group *different*
// outputs; each output's chain of operations is exactly the lists handler's. The file is built
// with -ffp-contract=off, so no multiply-add is fused even in the AVX-512 clone.
#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>

#include "osprey/gpu/host.hpp"

namespace osprey {
namespace {

constexpr Index kRowsPerTile = 4;   // MR: rows of a held in the micro-kernel
constexpr Index kColsPerTile = 16;  // NR: two AVX-512 vectors (four AVX2) of outputs per row
constexpr Index kInnerBlock = 256;  // KC: packed panel depth that stays in L1/L2

// acc[r][j] += a[r][k] * bp[k][j] for a MR x NR tile, k over [0, depth). acc lives in registers.
// The k loop is outermost, so each output still accumulates in k order.
__attribute__((target_clones("avx512f", "avx2", "default")))
void microTile(double* __restrict acc, const double* __restrict a, Index lda,
               const double* __restrict bp, Index depth) {
  double c[kRowsPerTile][kColsPerTile];
  for (Index r = 0; r < kRowsPerTile; ++r)
    for (Index j = 0; j < kColsPerTile; ++j) c[r][j] = acc[r * kColsPerTile + j];
  for (Index k = 0; k < depth; ++k) {
    const double* bk = bp + k * kColsPerTile;
#pragma GCC unroll 4
    for (Index r = 0; r < kRowsPerTile; ++r) {
      const double ar = a[r * lda + k];
#pragma GCC unroll 16
      for (Index j = 0; j < kColsPerTile; ++j) c[r][j] = c[r][j] + ar * bk[j];
    }
  }
  for (Index r = 0; r < kRowsPerTile; ++r)
    for (Index j = 0; j < kColsPerTile; ++j) acc[r * kColsPerTile + j] = c[r][j];
}

// The plain loop for edges (rows or columns left over after the tiles): same order.
void edgeRange(Scalar* out, const Scalar* a, const Scalar* b, Index inner, Index cols, Index r0,
               Index r1, Index c0, Index c1) {
  for (Index i = r0; i < r1; ++i)
    for (Index j = c0; j < c1; ++j) {
      Scalar acc = 0.0;
      for (Index k = 0; k < inner; ++k) acc = acc + a[i * inner + k] * b[k * cols + j];
      out[i * cols + j] = acc;
    }
}

}  // namespace

void hostMatMul(Scalar* out, const Scalar* a, const Scalar* b, Index rows, Index inner, Index cols) {
  const Index fullRows = rows / kRowsPerTile * kRowsPerTile;
  const Index fullCols = cols / kColsPerTile * kColsPerTile;
  const Index colTiles = fullCols / kColsPerTile;
  const Index work = rows * cols * std::max<Index>(inner, 1);

  // Column tiles are independent outputs: threads take whole column panels, pack that panel of b
  // once per k block, then sweep every row tile through it.
#pragma omp parallel if (work > 32768)
  {
    std::vector<double> panel(static_cast<std::size_t>(kInnerBlock * kColsPerTile));
    alignas(64) double acc[kRowsPerTile * kColsPerTile];
#pragma omp for schedule(dynamic, 1)
    for (Index ct = 0; ct < colTiles; ++ct) {
      const Index j0 = ct * kColsPerTile;
      for (Index k0 = 0; k0 < std::max<Index>(inner, 1); k0 += kInnerBlock) {
        const Index depth = std::min(kInnerBlock, inner - k0);
        for (Index k = 0; k < depth; ++k)
          std::memcpy(&panel[static_cast<std::size_t>(k * kColsPerTile)], b + (k0 + k) * cols + j0,
                      sizeof(double) * kColsPerTile);
        for (Index i0 = 0; i0 < fullRows; i0 += kRowsPerTile) {
          // A partial sum stored to `out` and reloaded is the same double: resuming the chain at
          // k0 keeps every output's k order intact.
          for (Index r = 0; r < kRowsPerTile; ++r)
            for (Index j = 0; j < kColsPerTile; ++j)
              acc[r * kColsPerTile + j] = k0 == 0 ? 0.0 : out[(i0 + r) * cols + j0 + j];
          microTile(acc, a + i0 * inner + k0, inner, panel.data(), depth);
          for (Index r = 0; r < kRowsPerTile; ++r)
            std::memcpy(out + (i0 + r) * cols + j0, acc + r * kColsPerTile, sizeof(double) * kColsPerTile);
        }
      }
    }
#pragma omp for schedule(static)
    for (Index i = fullRows; i < rows; ++i) edgeRange(out, a, b, inner, cols, i, i + 1, 0, fullCols);
#pragma omp for schedule(static)
    for (Index i = 0; i < rows; ++i) edgeRange(out, a, b, inner, cols, i, i + 1, fullCols, cols);
  }
}

}  // namespace osprey
