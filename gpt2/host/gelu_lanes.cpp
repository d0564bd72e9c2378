// GELU on gpu/host over the vector lanes (gelu_lanes.hpp says why).
#include "gpt2/host/gelu_lanes.hpp"

#include <algorithm>

#include "gpt2/layers/gelu.hpp"
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
template <class F, class... In>
osprey::Result<osprey::GpuHost::Buffer> eachLane(osprey::GpuHost& h, Index n, F f, const In*... in) {
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

osprey::Result<osprey::GpuHost::Buffer> geluForward(osprey::GpuHost& h, const osprey::GpuHost::Buffer& x) {
  return eachLane(h, h.length(x), [](Lanes v) { return geluValue(v); }, x.data());
}

osprey::Result<osprey::GpuHost::Buffer> geluBackward(osprey::GpuHost& h, const osprey::GpuHost::Buffer& dout,
                                                     const osprey::GpuHost::Buffer& x) {
  return eachLane(h, h.length(x), [](Lanes d, Lanes v) { return geluSlope(d, v); }, dout.data(), x.data());
}

}  // namespace gpt2::host_lanes
