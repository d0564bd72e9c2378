// Exact widening of stored element types to float64, and the encodings the writers use.
#include "osprey/io/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace osprey::io {
namespace {

TEST(DType, NamesAndSizesFollowSafetensors) {
  EXPECT_EQ(dtypeName(DType::BF16), "BF16");
  EXPECT_EQ(dtypeFromName("F16"), DType::F16);
  EXPECT_EQ(dtypeFromName("F8_E4M3"), DType::F8_E4M3);
  EXPECT_FALSE(dtypeFromName("F33").has_value());
  EXPECT_FALSE(dtypeFromName("f32").has_value());  // the format is case-sensitive
  EXPECT_EQ(dtypeBytes(DType::F64), 8u);
  EXPECT_EQ(dtypeBytes(DType::F32), 4u);
  EXPECT_EQ(dtypeBytes(DType::F16), 2u);
  EXPECT_EQ(dtypeBytes(DType::BF16), 2u);
  EXPECT_EQ(dtypeBytes(DType::Bool), 1u);
  EXPECT_TRUE(dtypeReadable(DType::F16));
  EXPECT_FALSE(dtypeReadable(DType::I64));
  EXPECT_FALSE(dtypeWritable(DType::F16));
}

TEST(DType, HalfWidensExactlyIncludingSubnormalsInfinityAndNan) {
  EXPECT_EQ(halfBitsToDouble(0x0000), 0.0);
  EXPECT_TRUE(std::signbit(halfBitsToDouble(0x8000)));
  EXPECT_EQ(halfBitsToDouble(0x3C00), 1.0);
  EXPECT_EQ(halfBitsToDouble(0xC000), -2.0);
  EXPECT_EQ(halfBitsToDouble(0x3555), 1365.0 / 4096.0);                           // 0.333251953125
  EXPECT_EQ(halfBitsToDouble(0x7BFF), 65504.0);                                   // largest finite
  EXPECT_EQ(halfBitsToDouble(0x0400), std::ldexp(1.0, -14));                      // smallest normal
  EXPECT_EQ(halfBitsToDouble(0x0001), std::ldexp(1.0, -24));                      // smallest subnormal
  EXPECT_EQ(halfBitsToDouble(0x03FF), 1023 * std::ldexp(1.0, -24));               // largest subnormal
  EXPECT_EQ(halfBitsToDouble(0x8001), -std::ldexp(1.0, -24));
  EXPECT_EQ(halfBitsToDouble(0x7C00), std::numeric_limits<double>::infinity());
  EXPECT_EQ(halfBitsToDouble(0xFC00), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(halfBitsToDouble(0x7E00)));
  EXPECT_TRUE(std::isnan(halfBitsToDouble(0x7C01)));
}

TEST(DType, EveryHalfAgreesWithTheCompilersFloat16) {
  // _Float16 is the compiler's own IEEE binary16: an independent check of all 65536 patterns.
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    _Float16 h;
    const auto b16 = static_cast<std::uint16_t>(bits);
    std::memcpy(&h, &b16, 2);
    const double expected = static_cast<double>(h);
    const double got = halfBitsToDouble(b16);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << bits;
    } else {
      ASSERT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(expected)) << bits;
    }
  }
}

TEST(DType, Bfloat16IsTheTopHalfOfAFloat) {
  EXPECT_EQ(bfloat16BitsToDouble(0x3F80), 1.0);
  EXPECT_EQ(bfloat16BitsToDouble(0xC0A0), -5.0);
  EXPECT_EQ(bfloat16BitsToDouble(0x0001), static_cast<double>(std::bit_cast<float>(0x00010000u)));  // subnormal
  EXPECT_EQ(bfloat16BitsToDouble(0x7F80), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(bfloat16BitsToDouble(0x7FC0)));
}

TEST(DType, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(floatToBfloat16Bits(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(floatToBfloat16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  EXPECT_EQ(floatToBfloat16Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(floatToBfloat16Bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_TRUE(std::isnan(bfloat16BitsToDouble(floatToBfloat16Bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(floatToBfloat16Bits(std::numeric_limits<float>::infinity()), 0x7F80);
}

TEST(DType, EncodeThenDecodeIsExactForRepresentableValues) {
  const std::vector<double> values{0.0, -1.5, 3.25, 1e-3, -7e30, std::ldexp(1.0, -140)};
  for (DType dtype : {DType::F64, DType::F32}) {
    std::vector<unsigned char> bytes(values.size() * dtypeBytes(dtype));
    encodeValues(dtype, values.data(), values.size(), bytes.data());
    std::vector<double> back(values.size());
    decodeValues(dtype, bytes.data(), values.size(), back.data());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double expected = dtype == DType::F64 ? values[i] : static_cast<double>(static_cast<float>(values[i]));
      EXPECT_EQ(back[i], expected) << dtypeName(dtype) << " " << i;
    }
  }
}

TEST(DType, BytesAreLittleEndian) {
  const double one = 1.0;
  unsigned char bytes[8];
  encodeValues(DType::F32, &one, 1, bytes);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[3], 0x3F);
  EXPECT_EQ(bytes[2], 0x80);
  encodeValues(DType::F64, &one, 1, bytes);
  EXPECT_EQ(bytes[7], 0x3F);
  EXPECT_EQ(bytes[6], 0xF0);
}

}  // namespace
}  // namespace osprey::io
