// GELU on gpu/host, four elements at a time: the shared geluValue and geluSlope (gpt2/layers/
// gelu.hpp) evaluated over the host's vector lanes (osprey/gpu/host/lanes.hpp), each lane the double
// computation bit for bit. GELU's tanh was the host training step's largest element-wise cost
// (bench/RESULTS.md). Defined here, for gpu/host alone, so that only the host compiler sees the
// vector types: gelu.hpp declares the two functions, and nvcc's units never instantiate them.
#include <algorithm>

#include "gpt2/layers/gelu.hpp"
#include "osprey/gpu/host/handler.hpp"
#include "osprey/gpu/host/lanes.hpp"

namespace gpt2::host_lanes {
namespace {

using osprey::Index;
using osprey::lanes::kLanes;
using osprey::lanes::Lanes;

// kLanes elements from p, of which `valid` are there: the rest are zeros, whose results are dropped
// (each lane's result depends on its own inputs alone).
Lanes loadPart(const double* p, Index valid) {
  double part[kLanes] = {};
  std::copy_n(p, valid, part);
  return Lanes::load(part);
}
void storePart(const Lanes& v, double* p, Index valid) {
  double part[kLanes];
  v.store(part);
  std::copy_n(part, valid, p);
}

// out[i] = f(a[i], b[i]...) lanes at a time, the blocks spread over the host's threads.
template <class H, class F, class... In>
osprey::Result<Buf<H>> eachLane(H& h, Index n, F f, const In*... in) {
  auto out = OSPREY_TRY(osprey::gpuAllocate<osprey::Scalar>(h.runtime(), n));
  double* o = out.data();
  const Index blocks = (n + kLanes - 1) / kLanes;
  OSPREY_CHECK(h.runtime()->forEach(blocks, [=](Index b) {
    const Index i = b * kLanes, valid = std::min<Index>(kLanes, n - i);
    if (valid == kLanes) {
      f(Lanes::load(in + i)...).store(o + i);
    } else {
      storePart(f(loadPart(in + i, valid)...), o + i, valid);
    }
  }));
  return out;
}

}  // namespace

template <class H>
osprey::Result<Buf<H>> geluForward(H& h, const Buf<H>& x) {
  return eachLane(h, h.length(x), [](Lanes v) { return geluValue(v); }, x.data());
}

template <class H>
osprey::Result<Buf<H>> geluBackward(H& h, const Buf<H>& dout, const Buf<H>& x) {
  return eachLane(h, h.length(x), [](Lanes d, Lanes v) { return geluSlope(d, v); }, dout.data(), x.data());
}

// The one handler gelu.hpp sends here (host_lanes::answers).
template osprey::Result<Buf<osprey::GpuHost>> geluForward(osprey::GpuHost&, const Buf<osprey::GpuHost>&);
template osprey::Result<Buf<osprey::GpuHost>> geluBackward(osprey::GpuHost&, const Buf<osprey::GpuHost>&,
                                                           const Buf<osprey::GpuHost>&);

}  // namespace gpt2::host_lanes
