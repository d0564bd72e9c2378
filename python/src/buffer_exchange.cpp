// Python's buffer protocol, both ways, without a copy:
//
//   numpy.asarray(buffer)      a host Buffer's doubles in place (writable: the array and the Buffer
//                              are one memory, and a write through either is seen by both)
//   osprey.from_buffer(array)  a host Buffer over an object's C-contiguous doubles in place (the
//                              object is held until the Buffer and every view of it are gone)
//
// A cuda Buffer's elements are on the GPU: asking it for a host buffer is a BufferError naming
// DLPack (dlpack_exchange.cpp), which shares them; an opencl Buffer's, naming fromGpu, which copies
// them (DLPack cannot share an OpenCL device's memory in place). NumPy treats a failed buffer export
// as "not an array" and would wrap the Buffer in a 0-d object array, so the Buffer also answers
// __array__: the host buffer in place (or copied, when NumPy asks for a copy or another dtype), the
// same BufferError for a cuda or opencl one.
//
// The export is written against CPython's slots rather than pybind11's def_buffer because a
// failure there must become a BufferError: pybind11 2.10 calls def_buffer's function from a C slot
// without catching, and a C++ exception escaping it would terminate the interpreter.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "bindings.hpp"
#include "python_results.hpp"

namespace osprey::python {
namespace {

// What one export hands out besides the elements: the shape and stride it points at.
struct ExportedShape {
  Py_ssize_t shape[1];
  Py_ssize_t strides[1];
};

// An empty buffer has no memory; a view still needs an address.
double gEmpty = 0.0;

char gDoubleFormat[] = "d";

std::string notOnTheHost(const DeviceBuffer& b) {
  if (b.device().kind() == DeviceKind::OpenCl)
    return fmt::format("the buffer's elements are on {}, not on the host: copy them back with fromGpu",
                       b.device().name());
  return fmt::format("the buffer's elements are on {}, not on the host: share them with DLPack "
                     "(torch.from_dlpack), or copy them back with fromGpu",
                     b.device().name());
}

extern "C" int bufferGet(PyObject* object, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    const auto b = py::handle(object).cast<SharedBuffer>();
    if (b->device().kind() != DeviceKind::Host) {
      PyErr_SetString(PyExc_BufferError, notOnTheHost(*b).c_str());
      return -1;
    }
    auto* shape = new ExportedShape{{static_cast<Py_ssize_t>(b->size())}, {sizeof(Scalar)}};
    view->buf = b->address() ? static_cast<void*>(b->address()) : static_cast<void*>(&gEmpty);
    view->len = static_cast<Py_ssize_t>(b->size()) * static_cast<Py_ssize_t>(sizeof(Scalar));
    view->itemsize = sizeof(Scalar);
    view->readonly = 0;
    view->format = (flags & PyBUF_FORMAT) ? gDoubleFormat : nullptr;
    view->ndim = 1;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? shape->shape : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? shape->strides : nullptr;
    view->suboffsets = nullptr;
    view->internal = shape;
    view->obj = object;  // the Buffer object holds the elements for as long as the view lives
    Py_INCREF(object);
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  } catch (...) {
    PyErr_SetString(PyExc_BufferError, "osprey.Buffer: the buffer could not be exported");
    return -1;
  }
}

extern "C" void bufferRelease(PyObject*, Py_buffer* view) { delete static_cast<ExportedShape*>(view->internal); }

// A Py_buffer held until the last copy of the Buffer made over it is gone.
std::shared_ptr<const void> heldView(Py_buffer view) {
  auto* held = new Py_buffer(view);
  return std::shared_ptr<const void>(held, [](const void* p) {
    auto* v = static_cast<Py_buffer*>(const_cast<void*>(p));
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire locked;
      PyBuffer_Release(v);
    }
    delete v;
  });
}

SharedBuffer fromBuffer(py::handle object) {
  Py_buffer view;
  if (PyObject_GetBuffer(object.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    raiseError(Error{fmt::format("from_buffer: a {} does not lend its memory as one C-contiguous block (the buffer "
                            "protocol); numpy.ascontiguousarray makes one",
                            std::string(py::str(py::type::handle_of(object).attr("__name__"))))});
  }
  const std::string format = view.format ? view.format : "B";
  if (!(format == "d" || format == "<d" || format == "=d" || format == "@d") || view.itemsize != 8) {
    PyBuffer_Release(&view);
    raiseError(Error{fmt::format("from_buffer: elements of format '{}' ({} bytes); Osprey's buffers hold doubles "
                            "(float64): convert with numpy's astype(numpy.float64), which copies",
                            format, view.itemsize)});
  }
  auto* address = static_cast<Scalar*>(view.buf);
  const Index n = view.len / 8;
  auto owner = heldView(view);  // released with the last copy of the Buffer
  auto host = valueOrRaise(openHostDevice());
  return valueOrRaise(host->borrow(n > 0 ? address : nullptr, n, std::move(owner)));
}

// numpy.asarray(buffer) and numpy.array(buffer, ...): NumPy 1 calls __array__() or
// __array__(dtype), NumPy 2 adds copy=. The elements in place through the buffer protocol unless a
// copy or another dtype is asked for.
py::object arrayOf(py::handle self, py::object dtype, py::object copy) {
  const auto& b = self.cast<const DeviceBuffer&>();
  if (b.device().kind() != DeviceKind::Host) throw py::buffer_error(notOnTheHost(b));
  py::module_ numpy = py::module_::import("numpy");
  py::object inPlace = numpy.attr("frombuffer")(py::memoryview(py::reinterpret_borrow<py::object>(self)),
                                                 py::arg("dtype") = numpy.attr("float64"));
  if (!copy.is_none() && copy.cast<bool>()) return numpy.attr("array")(inPlace, py::arg("dtype") = dtype);
  return numpy.attr("asarray")(inPlace, py::arg("dtype") = dtype);
}

}  // namespace

void bindBufferProtocol(py::module_& m, BufferClass& buffer) {
  buffer.def("__array__", &arrayOf, py::arg("dtype") = py::none(), py::kw_only(), py::arg("copy") = py::none(),
             "NumPy's conversion: a host Buffer's elements in place (a copy when asked); a cuda or opencl Buffer "
             "is a BufferError (use DLPack or fromGpu)");
  auto* type = reinterpret_cast<PyHeapTypeObject*>(buffer.ptr());
  type->as_buffer.bf_getbuffer = bufferGet;
  type->as_buffer.bf_releasebuffer = bufferRelease;

  m.def("from_buffer", &fromBuffer, py::arg("object"),
        "A host Buffer over an object's C-contiguous float64 memory (a NumPy array, an array.array('d'), a "
        "memoryview), in place: no copy. The object is kept alive while the Buffer lives.");
}

}  // namespace osprey::python
