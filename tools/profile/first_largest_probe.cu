// The decoded attention's maximum over a row of scores (gpt2/cuda/attend_row.hpp): one thread's
// fold m = select(x > m, x, m) from the first score, in position order (the reference's), against
// one warp's: each lane the first largest of its positions, then the lanes' picks combined by value
// and, between equal values, the earlier position; a NaN first score is the answer, as the fold
// keeps it. Both are checked bit for bit on rows of five kinds (ordinary, ties of +0.0 and -0.0,
// infinities, NaNs, a NaN first score) at every length timed, then timed with the clock.
//
//   nvcc -O3 -arch=sm_90a -std=c++20 -fmad=false --extended-lambda -DFMT_USE_CONSTEXPR=1 -DFMT_HEADER_ONLY \
//     -I . -I include -o first_largest_probe tools/profile/first_largest_probe.cu && ./first_largest_probe
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "gpt2/cuda/chains.hpp"
#include "gpt2/layers/fold_rows.hpp"

// Row r of rows (P each): out[2r] the thread fold's maximum, out[2r + 1] the warp's; cycles the
// same order, each read from shared memory as the attention kernel reads its scores.
__global__ void bothMaxima(const double* rows, int P, double* out, long long* cycles) {
  extern __shared__ double row[];
  for (int p = threadIdx.x; p < P; p += blockDim.x) row[p] = rows[static_cast<long long>(blockIdx.x) * P + p];
  __syncthreads();
  long long c0 = clock64();
  double folded = 0.0;
  if (threadIdx.x == 0) folded = gpt2::chains::fold(row, 1, P, row[0], gpt2::Larger{});
  __syncthreads();
  long long c1 = clock64();
  double warped = 0.0;
  if (threadIdx.x < 32) warped = gpt2::chains::warpFirstLargest(row, P);
  __syncthreads();
  long long c2 = clock64();
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = folded;
    out[2 * blockIdx.x + 1] = warped;
    cycles[2 * blockIdx.x] = c1 - c0;
    cycles[2 * blockIdx.x + 1] = c2 - c1;
  }
}

int main() {
  constexpr int kinds = 5, perKind = 40;
  const double inf = std::numeric_limits<double>::infinity();
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {  // splitmix64
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  auto nanWithPayload = [&] {
    const std::uint64_t bits = 0x7ff8000000000000ull | (next() & 0x0007ffffffffffffull) | (next() & 1ull) << 63;
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  };
  int mismatches = 0;
  for (int P : {1, 2, 31, 33, 64, 100, 300, 1024, 4096}) {
    const int rows = kinds * perKind;
    std::vector<double> host(static_cast<size_t>(rows) * P);
    for (int r = 0; r < rows; ++r) {
      double* v = host.data() + static_cast<size_t>(r) * P;
      const int kind = r / perKind;
      for (int p = 0; p < P; ++p) {
        const double u = static_cast<double>(next() >> 11) * 0x1.0p-53 * 20.0 - 10.0;
        switch (kind) {
          case 0: v[p] = u; break;                                                     // ordinary
          case 1: v[p] = next() % 3 == 0 ? (next() & 1 ? 0.0 : -0.0) : -std::round(std::fabs(u)); break;  // ties
          case 2: v[p] = next() % 5 == 0 ? (next() & 1 ? inf : -inf) : u; break;       // infinities
          case 3: v[p] = next() % 4 == 0 ? nanWithPayload() : u; break;                // NaNs
          default: v[p] = p == 0 ? nanWithPayload() : u; break;                        // NaN first
        }
      }
    }
    double *rowsOnDevice, *out;
    long long* cycles;
    cudaMalloc(&rowsOnDevice, host.size() * sizeof(double));
    cudaMalloc(&out, 2 * rows * sizeof(double));
    cudaMalloc(&cycles, 2 * rows * sizeof(long long));
    cudaMemcpy(rowsOnDevice, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice);
    bothMaxima<<<rows, 256, P * sizeof(double)>>>(rowsOnDevice, P, out, cycles);
    bothMaxima<<<rows, 256, P * sizeof(double)>>>(rowsOnDevice, P, out, cycles);  // the second timed
    std::vector<double> maxima(2 * rows);
    std::vector<long long> c(2 * rows);
    const cudaError_t status = cudaMemcpy(maxima.data(), out, maxima.size() * sizeof(double), cudaMemcpyDeviceToHost);
    cudaMemcpy(c.data(), cycles, c.size() * sizeof(long long), cudaMemcpyDeviceToHost);
    int differ = 0;
    long long foldCycles = 0, warpCycles = 0;
    for (int r = 0; r < rows; ++r) {
      // The reference's fold on the host: the device's thread fold must be it, the warp's too.
      const double* v = host.data() + static_cast<size_t>(r) * P;
      double m = v[0];
      for (int p = 1; p < P; ++p) m = v[p] > m ? v[p] : m;
      differ += std::memcmp(&maxima[2 * r], &m, sizeof(double)) != 0 ||
                std::memcmp(&maxima[2 * r + 1], &m, sizeof(double)) != 0;
      foldCycles += c[2 * r];
      warpCycles += c[2 * r + 1];
    }
    mismatches += differ;
    std::printf("P %4d: one thread's fold %7.1f cycles, one warp %6.1f cycles; %d of %d rows differ (%s)\n", P,
                double(foldCycles) / rows, double(warpCycles) / rows, differ, rows, cudaGetErrorString(status));
    cudaFree(rowsOnDevice);
    cudaFree(out);
    cudaFree(cycles);
  }
  std::printf("%s\n", mismatches == 0 ? "every row: the same bits" : "DIFFERENT bits");
  return mismatches == 0 ? 0 : 1;
}
