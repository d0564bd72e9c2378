// The extension module osprey._osprey; python/osprey/__init__.py is its public face.
#include "bindings.hpp"

PYBIND11_MODULE(_osprey, m) {
  using namespace osprey::python;
  m.doc() = "Osprey's GPU surface, zero-copy exchange (buffer protocol, DLPack) and GPT-2";
  m.attr("built_with_cuda") = builtWithCuda();
  m.attr("built_with_opencl") = builtWithOpenCl();
  auto buffer = bindBufferClass(m);
  bindSurface(m);
  bindBufferProtocol(m, buffer);
  bindDlpack(m, buffer);
  bindGpt2(m);
}
