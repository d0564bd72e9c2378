// A C++ `if` on a value the tracer records cannot be followed (the trace sees one call, not the
// element's data), so a traced comparison has no conversion to bool and such a kernel does not
// compile. Its twin says the same with osprey::select, which the device evaluates per element.
// EXPECT: operator bool
#include "osprey/gpu/opencl/handler.hpp"

namespace osprey::compile_fail {

Result<GpuOpenCl::Buffer> positivePart(GpuOpenCl& h, const GpuOpenCl::Buffer& x) {
  const View v = x.view();
  return h.build(v.n, [=](KernelIndex<GpuOpenCl> i) -> KernelScalar<GpuOpenCl> {
#if defined(OSPREY_POSITIVE_TWIN)
    return select(v[i] > 0.0, v[i], 0.0);
#else
    if (v[i] > 0.0) return v[i];
    return 0.0;
#endif
  });
}

}  // namespace osprey::compile_fail
