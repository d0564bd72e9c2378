// The GPU surface without the effect: lift [1, 2, 3, 4], square it as a 2x2 matrix on the
// device, read one element back. Prints `host: first element = 7` (or `cuda: …` under nvcc).
#include <cstdio>
#include <vector>

#include "osprey/gpu/host/handler.hpp"

int main() {
  using namespace osprey;
  auto dev = HostDevice::open();
  if (!dev.ok()) return std::fprintf(stderr, "%s\n", dev.error().message.c_str()), 1;
  auto x = toGpu(*dev, std::vector<Scalar>{1, 2, 3, 4});
  auto y = x.ok() ? gpuMatMul(*x, *x, 2, 2, 2) : Result<GpuBuffer<HostDevice>>(x.error());
  auto first = y.ok() ? gpuGet(*y, 0) : Result<Scalar>(y.error());
  if (!first.ok()) return std::fprintf(stderr, "%s\n", first.error().message.c_str()), 1;
  std::printf("%s: first element = %g\n", gpuDevice(*dev).c_str(), *first);
}
