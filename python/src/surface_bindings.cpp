// The GPU surface in Python, named as in C++ (gpu/surface.hpp) and in the seed's program:
//
//   toGpu(values, device=None)            -> Success(Buffer) | Error
//   fromGpu(buffer)                       -> Success(list of float) | Error
//   gpuMatMul(a, b, rows, inner, cols)    -> Success(Buffer) | Error
//   gpuGet(buffer, i)                     -> Success(float) | Error
//   gpuLength(buffer)                     -> int
//   gpuLoadTensor(path, name, device=None) -> Success(Buffer) | Error
//   gpuDevice(device=None)                -> str ("host", "cuda: NVIDIA H200", "opencl: pocl cpu");
//                                            also of a Buffer
//   rawDevicePtr(buffer)                  -> int, the elements' address in place
//   bufFromRawDevicePtr(address, length, device=None, owner=None) -> Success(Buffer) | Error
//
// `device` is "host", "cuda" or "opencl"; None takes OSPREY_GPU (else host). A device that cannot
// be had is an Error in the CLI's words, never a run on the host instead. The calls that return a Result
// return every failure as Error, a wrong argument type included; the others raise OspreyError.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "python_results.hpp"

namespace osprey::python {
namespace {

std::string typeName(py::handle object) { return py::str(py::type::handle_of(object).attr("__name__")); }

py::object bufferObject(SharedBuffer b) { return py::cast(std::move(b)); }

// Host values from a Python object: a buffer of C-contiguous doubles is read in place, anything
// else element by element (floats, ints, NumPy scalars: whatever has __float__).
Result<std::vector<Scalar>> hostValues(py::handle values, const char* what) {
  if (py::isinstance<py::str>(values) || py::isinstance<py::bytes>(values))
    return Error{fmt::format("{}: takes numbers, not a {}", what, typeName(values))};
  if (PyObject_CheckBuffer(values.ptr())) {
    Py_buffer view;
    if (PyObject_GetBuffer(values.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
      const std::string format = view.format ? view.format : "B";
      std::vector<Scalar> out;
      if ((format == "d" || format == "<d" || format == "=d" || format == "@d") && view.itemsize == 8) {
        const auto* p = static_cast<const Scalar*>(view.buf);
        out.assign(p, p + view.len / 8);
        PyBuffer_Release(&view);
        return out;
      }
      PyBuffer_Release(&view);
    } else {
      PyErr_Clear();  // not contiguous doubles: read it element by element below
    }
  }
  py::iterator items;
  try {
    items = py::iter(values);
  } catch (const py::error_already_set&) {
    return Error{fmt::format("{}: takes a sequence of numbers, not a {}", what, typeName(values))};
  }
  std::vector<Scalar> out;
  for (py::handle item : items) {
    const double x = PyFloat_AsDouble(item.ptr());
    if (x == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return Error{fmt::format("{}: element {} is a {}, not a number", what, out.size(), typeName(item))};
    }
    out.push_back(x);
  }
  return out;
}

}  // namespace

Result<SharedBuffer> bufferArgument(py::handle object, const char* what) {
  if (!py::isinstance<DeviceBuffer>(object))
    return Error{fmt::format("{} is a {}, not an osprey Buffer", what, typeName(object))};
  return object.cast<SharedBuffer>();
}

Result<std::shared_ptr<Device>> deviceArgument(py::handle name) {
  if (name.is_none()) return openDevice("");
  if (!py::isinstance<py::str>(name))
    return Error{fmt::format("device is a {}: choose \"host\", \"cuda\" or \"opencl\"", typeName(name))};
  const std::string text = name.cast<std::string>();
  // The CLI refuses an empty --device before choosing; so does this, rather than reading OSPREY_GPU.
  if (text.empty()) return Error{"an empty device name: choose host, cuda or opencl"};
  return openDevice(text);
}

BufferClass bindBufferClass(py::module_& m) {
  BufferClass buffer(m, "Buffer", py::buffer_protocol(),
                     "Doubles on a device (host, cuda or opencl), made by toGpu, gpuMatMul, gpuLoadTensor, "
                     "from_dlpack, from_buffer or bufFromRawDevicePtr. NumPy reads a host buffer in place "
                     "(numpy.asarray); DLPack shares a host or cuda one (numpy.from_dlpack, torch.from_dlpack); "
                     "fromGpu copies any back.");
  buffer.def("__len__", [](const DeviceBuffer& b) { return b.size(); })
      .def_property_readonly("device", [](const DeviceBuffer& b) { return b.device().name(); },
                             "the device holding the elements: \"host\", \"cuda: NVIDIA H200\", "
                             "\"opencl: pocl cpu\"")
      .def_property_readonly(
          "address", [](const DeviceBuffer& b) { return reinterpret_cast<std::uintptr_t>(b.address()); },
          "where the elements live on the device (rawDevicePtr)")
      .def("tolist", [](const DeviceBuffer& b) { return valueOrRaise(b.toHost()); },
           "the elements as a list of floats (fromGpu's value)")
      .def("__repr__", [](const DeviceBuffer& b) {
        return fmt::format("osprey.Buffer({} element{} on {})", b.size(), b.size() == 1 ? "" : "s", b.device().name());
      });
  return buffer;
}

void bindSurface(py::module_& m) {
  m.def(
      "toGpu",
      [](py::handle values, py::handle device) {
        auto lifted = [&]() -> Result<SharedBuffer> {
          auto xs = OSPREY_TRY(hostValues(values, "toGpu"));
          auto dev = OSPREY_TRY(deviceArgument(device));
          py::gil_scoped_release unlocked;
          return dev->lift(std::span<const Scalar>(xs));
        }();
        return resultObject(std::move(lifted), bufferObject);
      },
      py::arg("values"), py::arg("device") = py::none(),
      "Host values (a sequence of numbers or a buffer of doubles) copied onto the device: Success(Buffer) or Error.");

  m.def(
      "fromGpu",
      [](py::handle buffer) {
        auto values = [&]() -> Result<std::vector<Scalar>> {
          auto b = OSPREY_TRY(bufferArgument(buffer, "fromGpu: the argument"));
          py::gil_scoped_release unlocked;
          return b->toHost();
        }();
        return resultObject(std::move(values), [](std::vector<Scalar> xs) { return py::cast(xs); });
      },
      py::arg("buffer"), "Every element back on the host: Success(list of float) or Error.");

  m.def(
      "gpuMatMul",
      [](py::handle a, py::handle b, Index rows, Index inner, Index cols) {
        auto product = [&]() -> Result<SharedBuffer> {
          auto left = OSPREY_TRY(bufferArgument(a, "gpuMatMul: argument 1"));
          auto right = OSPREY_TRY(bufferArgument(b, "gpuMatMul: argument 2"));
          py::gil_scoped_release unlocked;
          return left->matMul(*right, rows, inner, cols);
        }();
        return resultObject(std::move(product), bufferObject);
      },
      py::arg("a"), py::arg("b"), py::arg("rows"), py::arg("inner"), py::arg("cols"),
      "The row-major (rows x inner) * (inner x cols) product, each output one fused multiply-add chain in "
      "k order: Success(Buffer) or Error.");

  m.def(
      "gpuGet",
      [](py::handle buffer, Index i) {
        auto value = [&]() -> Result<Scalar> {
          auto b = OSPREY_TRY(bufferArgument(buffer, "gpuGet: the argument"));
          py::gil_scoped_release unlocked;
          return b->get(i);
        }();
        return resultObject(std::move(value), [](Scalar x) { return py::float_(x); });
      },
      py::arg("buffer"), py::arg("index"), "Element `index` read back: Success(float) or Error.");

  m.def(
      "gpuLength",
      [](py::handle buffer) { return valueOrRaise(bufferArgument(buffer, "gpuLength: the argument"))->size(); },
      py::arg("buffer"), "The number of elements.");

  m.def(
      "gpuLoadTensor",
      [](const std::string& path, const std::string& name, py::handle device) {
        auto loaded = [&]() -> Result<SharedBuffer> {
          auto dev = OSPREY_TRY(deviceArgument(device));
          py::gil_scoped_release unlocked;
          return dev->loadTensor(path, name);
        }();
        return resultObject(std::move(loaded), bufferObject);
      },
      py::arg("path"), py::arg("name"), py::arg("device") = py::none(),
      "One named tensor of a checkpoint (safetensors or llm.c .bin), as doubles on the device: Success(Buffer) "
      "or Error.");

  m.def(
      "gpuDevice",
      [](py::handle device) -> std::string {
        if (py::isinstance<DeviceBuffer>(device)) return device.cast<SharedBuffer>()->device().name();
        return valueOrRaise(deviceArgument(device))->name();
      },
      py::arg("device") = py::none(),
      "Who answers: \"host\", \"cuda: <GPU name>\" or \"opencl: <device name>\" (the device OSPREY_GPU or "
      "`device` names, or a Buffer's). "
      "Raises OspreyError when that device cannot be had.");

  m.def(
      "rawDevicePtr",
      [](py::handle buffer) {
        auto b = valueOrRaise(bufferArgument(buffer, "rawDevicePtr: the argument"));
        return reinterpret_cast<std::uintptr_t>(b->address());
      },
      py::arg("buffer"),
      "The address of the buffer's elements on its device. It is valid while the buffer lives "
      "(include/osprey/gpu/raw_pointer.hpp gives the rules). On opencl it is the device's own handle for its "
      "memory, which only bufFromRawDevicePtr(..., device=\"opencl\") reads.");

  m.def(
      "bufFromRawDevicePtr",
      [](std::uintptr_t address, Index length, py::handle device, py::object owner) {
        auto made = [&]() -> Result<SharedBuffer> {
          auto dev = OSPREY_TRY(deviceArgument(device));
          // The owner (any Python object) lives as long as the buffer and its copies.
          std::shared_ptr<const void> keep;
          if (!owner.is_none()) {
            keep = std::shared_ptr<const void>(owner.release().ptr(), [](const void* p) {
              if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing left to release
              py::gil_scoped_acquire locked;
              Py_DECREF(static_cast<PyObject*>(const_cast<void*>(p)));
            });
          }
          return dev->borrow(reinterpret_cast<Scalar*>(address), length, std::move(keep));
        }();
        return resultObject(std::move(made), bufferObject);
      },
      py::arg("address"), py::arg("length"), py::arg("device") = py::none(), py::arg("owner") = py::none(),
      "A Buffer over `length` doubles at `address` on the device, which Osprey does not own: `owner` is kept "
      "alive until the buffer and every view of it are gone. Success(Buffer) or Error.");
}

}  // namespace osprey::python
