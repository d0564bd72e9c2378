// Element types a checkpoint file may hold, and their exact conversion to and from float64.
//
// Osprey computes in float64, so every stored element is widened exactly: F64 and F32 are copied,
// F16 (including subnormals, infinities and NaN) and BF16 are rebuilt bit by bit. The names are
// the safetensors spelling. Bytes are little-endian whatever the host's order, because the files
// are (both safetensors and llm.c write little-endian).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "osprey/config.hpp"

namespace osprey::io {

// Every byte-sized dtype the safetensors format names. Only F64, F32, F16 and BF16 can be read
// as values; the others are recognised so that a file which also holds, say, an I64 buffer still
// opens and its float tensors stay readable.
enum class DType { Bool, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

std::string_view dtypeName(DType dtype);
std::optional<DType> dtypeFromName(std::string_view name);
std::size_t dtypeBytes(DType dtype);

// Whether decodeValues can widen this dtype to float64 (F64, F32, F16, BF16).
bool dtypeReadable(DType dtype);
// Whether encodeValues can store float64 values as this dtype (F64, F32, BF16).
bool dtypeWritable(DType dtype);

// Exact widenings of one element's bits.
Scalar halfBitsToDouble(std::uint16_t bits);
Scalar bfloat16BitsToDouble(std::uint16_t bits);
Scalar floatBitsToDouble(std::uint32_t bits);

// float32 -> bfloat16 bits, rounding to nearest even (what PyTorch's `.to(torch.bfloat16)` does);
// NaN stays NaN.
std::uint16_t floatToBfloat16Bits(float value);

// bytes (count * dtypeBytes(dtype), little-endian) -> out[0..count). dtype must be readable.
void decodeValues(DType dtype, const unsigned char* bytes, std::size_t count, Scalar* out);

// values[0..count) -> out (count * dtypeBytes(dtype) bytes, little-endian). dtype must be
// writable. F32 and BF16 round to nearest (BF16 through float32, as PyTorch converts weights).
void encodeValues(DType dtype, const Scalar* values, std::size_t count, unsigned char* out);

}  // namespace osprey::io
