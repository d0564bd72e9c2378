// The Python classes behind Results (python/osprey/result.py), looked up where they are made so
// that the extension never holds a Python object past the interpreter's end.
#include "python_results.hpp"

namespace osprey::python {

namespace {
py::object resultClass(const char* name) { return py::module_::import("osprey.result").attr(name); }
}  // namespace

py::object success(py::object value) { return resultClass("Success")(std::move(value)); }

py::object failure(const Error& error) { return resultClass("Error")(error.message); }

void raiseError(const Error& error) {
  PyErr_SetObject(resultClass("OspreyError").ptr(), py::str(error.message).ptr());
  throw py::error_already_set();
}

}  // namespace osprey::python
