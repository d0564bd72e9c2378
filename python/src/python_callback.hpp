// A Python callable called from C++ work that runs without the GIL (generation, training): each
// call takes the GIL, checks for Ctrl-C, and calls; a Python exception (KeyboardInterrupt
// included) becomes an Error that stops the C++ work cleanly, and is raised again, unchanged, when
// the work has returned (rethrowIfRaised). The C++ side never sees a Python exception unwind
// through it.
#pragma once

#include <optional>
#include <utility>

#include <pybind11/pybind11.h>

#include "osprey/result.hpp"

namespace osprey::python {

namespace py = pybind11;

class PythonCallback {
 public:
  explicit PythonCallback(py::object callable) : m_callable(std::move(callable)) {}

  bool empty() const { return m_callable.is_none(); }

  // callable(make()) with the GIL held (make() builds the argument then, so no Python object is
  // made or dropped without it). Whether the work should go on: the answer's truth, None counting
  // as yes; an Error if the callable raised (or Ctrl-C was pressed).
  template <class Make>
  Result<bool> call(Make&& make) {
    py::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() != 0) return stopped(py::error_already_set());
    try {
      const py::object answer = m_callable(make());
      if (answer.is_none()) return true;
      const int truth = PyObject_IsTrue(answer.ptr());
      if (truth < 0) throw py::error_already_set();
      return truth == 1;
    } catch (py::error_already_set& raised) {
      return stopped(std::move(raised));
    }
  }

  // Called with the GIL held once the work has returned: the callback's exception, if it raised.
  void rethrowIfRaised() {
    if (m_raised) {
      py::error_already_set raised = std::move(*m_raised);
      m_raised.reset();
      throw raised;
    }
  }

 private:
  Error stopped(py::error_already_set raised) {
    Error error{std::string("stopped by the Python callback: ") + raised.what()};
    m_raised = std::move(raised);
    return error;
  }

  py::object m_callable;
  std::optional<py::error_already_set> m_raised;
};

}  // namespace osprey::python
