// The opencl device traces its kernels, so a kernel must take the handler's KernelIndex: one that
// takes a plain osprey::Index (it could only run on the host) is rejected by build at compile
// time, never traced wrongly or refused at run time. Its twin takes KernelIndex<H>.
// EXPECT: osprey::trace::Idx
#include "osprey/gpu/opencl/handler.hpp"

namespace osprey::compile_fail {

Result<GpuOpenCl::Buffer> doubled(GpuOpenCl& h, const GpuOpenCl::Buffer& x) {
  const View v = x.view();
#if defined(OSPREY_POSITIVE_TWIN)
  return h.build(v.n, [=](KernelIndex<GpuOpenCl> i) -> KernelScalar<GpuOpenCl> { return v[i] * 2.0; });
#else
  return h.build(v.n, [=](Index i) -> Scalar { return v[i] * 2.0; });
#endif
}

}  // namespace osprey::compile_fail
