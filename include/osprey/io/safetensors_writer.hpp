// Writing safetensors files that PyTorch (`safetensors.torch.load_file`) and transformers
// (`from_pretrained`) load unchanged.
//
// The layout follows the reference implementation byte for byte: tensors sorted by name, the
// header as compact JSON with "__metadata__" first and each entry as {"dtype", "shape",
// "data_offsets"}, padded with spaces so the data section starts 8-byte aligned, and the data
// packed in header order with no gaps. Saves are atomic (atomic_file.hpp).
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "osprey/config.hpp"
#include "osprey/io/dtype.hpp"
#include "osprey/result.hpp"

namespace osprey::io {

// One tensor to save: its values (row-major, float64) are borrowed, not copied.
struct TensorToSave {
  std::string name;          // e.g. "h.0.attn.c_attn.weight"
  std::vector<Index> shape;  // e.g. {768, 2304}; product must equal values.size()
  std::span<const Scalar> values;
};

// One tensor whose bytes are already encoded (any dtype; for tests and exotic files).
struct EncodedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Index> shape;
  std::string bytes;  // exactly product(shape) * dtypeBytes(dtype)
};

// transformers refuses a safetensors checkpoint whose metadata lacks {"format": "pt"}.
inline const std::map<std::string, std::string> kPyTorchMetadata{{"format", "pt"}};

// Saves `tensors` as `dtype` (F32, F64 or BF16), atomically.
Result<void> writeSafetensors(const std::string& path, const std::vector<TensorToSave>& tensors, DType dtype,
                              const std::map<std::string, std::string>& metadata = kPyTorchMetadata);

// The whole file's bytes for already-encoded tensors (no file is written).
Result<std::string> encodeSafetensors(const std::vector<EncodedTensor>& tensors,
                                      const std::map<std::string, std::string>& metadata = kPyTorchMetadata);

}  // namespace osprey::io
