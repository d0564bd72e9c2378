// Element types of checkpoint files: names, sizes, and exact widening to float64.
#include "osprey/io/dtype.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace osprey::io {
namespace {

struct DTypeFacts {
  DType dtype;
  std::string_view name;
  std::size_t bytes;
};

// In the enum's order, so facts(d) is a table look-up.
constexpr std::array<DTypeFacts, 15> kFacts{{
    {DType::Bool, "BOOL", 1},       {DType::U8, "U8", 1},   {DType::I8, "I8", 1},
    {DType::F8_E5M2, "F8_E5M2", 1}, {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::I16, "I16", 2},         {DType::U16, "U16", 2}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},       {DType::I32, "I32", 4}, {DType::U32, "U32", 4},
    {DType::F32, "F32", 4},         {DType::F64, "F64", 8}, {DType::I64, "I64", 8},
    {DType::U64, "U64", 8},
}};

const DTypeFacts& facts(DType dtype) { return kFacts[static_cast<std::size_t>(dtype)]; }

std::uint16_t load16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
std::uint32_t load32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
std::uint64_t load64(const unsigned char* p) {
  return static_cast<std::uint64_t>(load32(p)) | (static_cast<std::uint64_t>(load32(p + 4)) << 32);
}
void store16(unsigned char* p, std::uint16_t v) {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
}
void store32(unsigned char* p, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<unsigned char>(v >> (8 * k));
}
void store64(unsigned char* p, std::uint64_t v) {
  for (int k = 0; k < 8; ++k) p[k] = static_cast<unsigned char>(v >> (8 * k));
}

}  // namespace

std::string_view dtypeName(DType dtype) { return facts(dtype).name; }

std::optional<DType> dtypeFromName(std::string_view name) {
  for (const DTypeFacts& f : kFacts) {
    if (f.name == name) return f.dtype;
  }
  return std::nullopt;
}

std::size_t dtypeBytes(DType dtype) { return facts(dtype).bytes; }

bool dtypeReadable(DType dtype) {
  return dtype == DType::F64 || dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

bool dtypeWritable(DType dtype) {
  return dtype == DType::F64 || dtype == DType::F32 || dtype == DType::BF16;
}

Scalar halfBitsToDouble(std::uint16_t bits) {
  // IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. Every value is a
  // small integer times a power of two, so ldexp (an exact scaling) rebuilds it in float64.
  const bool negative = (bits & 0x8000u) != 0;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  Scalar magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<Scalar>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 0x1F) {
    magnitude = mantissa == 0 ? std::numeric_limits<Scalar>::infinity()
                              : std::numeric_limits<Scalar>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<Scalar>(1024 + mantissa), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

Scalar bfloat16BitsToDouble(std::uint16_t bits) {
  // bfloat16 is the top half of a float32.
  return floatBitsToDouble(static_cast<std::uint32_t>(bits) << 16);
}

Scalar floatBitsToDouble(std::uint32_t bits) {
  return static_cast<Scalar>(std::bit_cast<float>(bits));
}

std::uint16_t floatToBfloat16Bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // stay NaN
  const std::uint32_t roundingBias = 0x7FFFu + ((bits >> 16) & 1u);  // ties to even
  return static_cast<std::uint16_t>((bits + roundingBias) >> 16);
}

void decodeValues(DType dtype, const unsigned char* bytes, std::size_t count, Scalar* out) {
  switch (dtype) {
    case DType::F64:
      for (std::size_t i = 0; i < count; ++i) out[i] = std::bit_cast<double>(load64(bytes + 8 * i));
      return;
    case DType::F32:
      for (std::size_t i = 0; i < count; ++i) out[i] = floatBitsToDouble(load32(bytes + 4 * i));
      return;
    case DType::F16:
      for (std::size_t i = 0; i < count; ++i) out[i] = halfBitsToDouble(load16(bytes + 2 * i));
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < count; ++i) out[i] = bfloat16BitsToDouble(load16(bytes + 2 * i));
      return;
    default:
      // Callers check dtypeReadable first; an unreadable dtype decodes to NaN, never garbage.
      for (std::size_t i = 0; i < count; ++i) out[i] = std::numeric_limits<Scalar>::quiet_NaN();
      return;
  }
}

void encodeValues(DType dtype, const Scalar* values, std::size_t count, unsigned char* out) {
  switch (dtype) {
    case DType::F64:
      for (std::size_t i = 0; i < count; ++i) store64(out + 8 * i, std::bit_cast<std::uint64_t>(values[i]));
      return;
    case DType::F32:
      for (std::size_t i = 0; i < count; ++i) {
        store32(out + 4 * i, std::bit_cast<std::uint32_t>(static_cast<float>(values[i])));
      }
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < count; ++i) {
        store16(out + 2 * i, floatToBfloat16Bits(static_cast<float>(values[i])));
      }
      return;
    default:
      // Callers check dtypeWritable first; anything else is written as zero bytes.
      std::memset(out, 0, count * dtypeBytes(dtype));
      return;
  }
}

}  // namespace osprey::io
