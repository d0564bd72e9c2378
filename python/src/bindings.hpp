// What each bindings file adds to the module `osprey._osprey` (module.cpp calls them in order).
#pragma once

#include <memory>

#include <pybind11/pybind11.h>

#include "device.hpp"

namespace osprey::python {

namespace py = pybind11;

// osprey.Buffer: one DeviceBuffer, shared by Python objects and the memory views made of it.
using BufferClass = py::class_<DeviceBuffer, SharedBuffer>;

BufferClass bindBufferClass(py::module_& m);                    // surface_bindings.cpp
void bindSurface(py::module_& m);                               // surface_bindings.cpp
void bindBufferProtocol(py::module_& m, BufferClass& buffer);   // buffer_exchange.cpp
void bindDlpack(py::module_& m, BufferClass& buffer);           // dlpack_exchange.cpp
void bindGpt2(py::module_& m);                                  // gpt2_bindings.cpp

// The Buffer a Python object holds, or the Error saying what it is instead (`what` names the
// argument: "gpuMatMul: argument 2").
Result<SharedBuffer> bufferArgument(py::handle object, const char* what);

// The device a Python argument names (None: OSPREY_GPU, else host).
Result<std::shared_ptr<Device>> deviceArgument(py::handle name);

}  // namespace osprey::python
