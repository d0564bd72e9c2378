// Results and Errors as Python sees them: the surface's fallible calls return osprey.Success(value)
// or osprey.Error(message) (python/osprey/result.py: classes `match` takes by keyword), and the rest
// of the module raises osprey.OspreyError. Both carry the library's Error message unchanged.
#pragma once

#include <utility>

#include <pybind11/pybind11.h>

#include "osprey/result.hpp"

namespace osprey::python {

namespace py = pybind11;

// osprey.Success(value), osprey.Error(message).
py::object success(py::object value);
py::object failure(const Error& error);

// A Result as Success(convert(value)) or Error(message).
template <class T, class Convert>
py::object resultObject(Result<T> result, Convert&& convert) {
  if (!result.ok()) return failure(result.error());
  return success(py::object(convert(std::move(*result))));
}

// Raises osprey.OspreyError(message) (a RuntimeError) in the calling Python code.
[[noreturn]] void raiseError(const Error& error);

// The value of a Result, or osprey.OspreyError raised.
template <class T>
T valueOrRaise(Result<T> result) {
  if (!result.ok()) raiseError(result.error());
  return std::move(*result);
}
inline void checkOrRaise(const Result<void>& result) {
  if (!result.ok()) raiseError(result.error());
}

}  // namespace osprey::python
