// One tensor read from a checkpoint: its shape and its values as float64, row-major.
#pragma once

#include <vector>

#include "osprey/config.hpp"

namespace osprey::io {

struct TensorData {
  std::vector<Index> shape;     // e.g. {768, 2304}
  std::vector<Scalar> values;   // row-major, converted to float64 exactly
};

}  // namespace osprey::io
