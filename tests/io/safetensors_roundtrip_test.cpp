// Safetensors written by Osprey read back exactly, in every dtype, and the bytes on disk follow
// the reference implementation's layout (what PyTorch and transformers load).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "io/io_test_files.hpp"
#include "osprey/io/safetensors.hpp"
#include "osprey/io/safetensors_writer.hpp"
#include "osprey/io/tensor_file.hpp"

namespace osprey::io {
namespace {

using testing::ScratchDir;

// Distinct values that float32 holds exactly, so F32 round trips compare with ==.
std::vector<Scalar> ramp(std::size_t n, Scalar start) {
  std::vector<Scalar> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = start + 0.25 * static_cast<Scalar>(i) - 3.0;
  return values;
}

std::string encodeHalves(const std::vector<std::uint16_t>& bits) {
  std::string bytes;
  for (std::uint16_t b : bits) {
    bytes.push_back(static_cast<char>(b & 0xFF));
    bytes.push_back(static_cast<char>(b >> 8));
  }
  return bytes;
}

TEST(SafetensorsRoundTrip, F32AndF64ReadBackExactly) {
  ScratchDir dir;
  const std::vector<Scalar> a = ramp(6, 1.0);
  const std::vector<Scalar> b = ramp(4, -2.0);
  const std::vector<Scalar> scalar{42.5};
  const std::vector<Scalar> exact64{0.1, 1.0 / 3.0, -std::ldexp(1.0, -1060), 1e300};  // need F64
  for (DType dtype : {DType::F32, DType::F64}) {
    const std::string path = dir.file(std::string("m_") + std::string(dtypeName(dtype)) + ".safetensors");
    std::vector<TensorToSave> tensors{{"zeta.weight", {2, 3}, a},
                                      {"alpha.bias", {4}, b},
                                      {"scalar", {}, scalar},
                                      {"empty", {0, 5}, {}}};
    if (dtype == DType::F64) tensors.push_back({"exact", {4}, exact64});
    ASSERT_TRUE(writeSafetensors(path, tensors, dtype).ok());

    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    std::vector<std::string> expectedNames{"alpha.bias", "empty", "scalar", "zeta.weight"};
    if (dtype == DType::F64) expectedNames.insert(expectedNames.begin() + 2, "exact");
    EXPECT_EQ(file->names(), expectedNames);
    EXPECT_EQ(file->metadata().at("format"), "pt");
    for (const TensorToSave& t : tensors) {
      auto info = file->info(t.name);
      ASSERT_TRUE(info.ok());
      EXPECT_EQ(info->dtype, dtype);
      EXPECT_EQ(info->shape, t.shape);
      auto data = file->read(t.name);
      ASSERT_TRUE(data.ok()) << data.error().message;
      EXPECT_EQ(data->shape, t.shape);
      ASSERT_EQ(data->values.size(), t.values.size());
      for (std::size_t i = 0; i < t.values.size(); ++i) {
        EXPECT_EQ(std::bit_cast<std::uint64_t>(data->values[i]), std::bit_cast<std::uint64_t>(t.values[i]))
            << t.name << "[" << i << "]";
      }
    }
  }
}

TEST(SafetensorsRoundTrip, F32RoundsToNearestFloat) {
  ScratchDir dir;
  const std::vector<Scalar> values{0.1, 1.0 / 3.0, 1e-50, 1e50, -0.0};
  ASSERT_TRUE(writeSafetensors(dir.file("r.safetensors"), {{"x", {5}, values}}, DType::F32).ok());
  auto data = readTensor(dir.file("r.safetensors"), "x");
  ASSERT_TRUE(data.ok());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(data->values[i], static_cast<double>(static_cast<float>(values[i])));
  }
  EXPECT_TRUE(std::signbit(data->values[4]));
  EXPECT_EQ(data->values[3], std::numeric_limits<double>::infinity());
}

TEST(SafetensorsRoundTrip, Bfloat16WrittenAndRead) {
  ScratchDir dir;
  const std::vector<Scalar> values{1.0, -2.5, 0.15625, 96.0};  // all exact in bfloat16
  ASSERT_TRUE(writeSafetensors(dir.file("b.safetensors"), {{"w", {2, 2}, values}}, DType::BF16).ok());
  auto file = SafetensorsFile::open(dir.file("b.safetensors"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->info("w")->dtype, DType::BF16);
  EXPECT_EQ(file->read("w")->values, values);
}

TEST(SafetensorsRoundTrip, F16AndBf16BitPatternsDecodeExactly) {
  ScratchDir dir;
  const std::vector<std::uint16_t> halfBits{0x3C00, 0x0001, 0x03FF, 0x7BFF, 0xFC00, 0x7E00, 0x8000};
  const std::vector<std::uint16_t> bfloatBits{0x3F80, 0xC0A0, 0x0001, 0x7F80};
  auto bytes = encodeSafetensors({{"half", DType::F16, {7}, encodeHalves(halfBits)},
                                  {"brain", DType::BF16, {2, 2}, encodeHalves(bfloatBits)}});
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  testing::writeBytes(dir.file("h.safetensors"), *bytes);

  auto half = readTensor(dir.file("h.safetensors"), "half");
  ASSERT_TRUE(half.ok()) << half.error().message;
  ASSERT_EQ(half->values.size(), halfBits.size());
  EXPECT_EQ(half->values[0], 1.0);
  EXPECT_EQ(half->values[1], std::ldexp(1.0, -24));
  EXPECT_EQ(half->values[2], 1023 * std::ldexp(1.0, -24));
  EXPECT_EQ(half->values[3], 65504.0);
  EXPECT_EQ(half->values[4], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(half->values[5]));
  EXPECT_TRUE(std::signbit(half->values[6]) && half->values[6] == 0.0);

  auto brain = readTensor(dir.file("h.safetensors"), "brain");
  ASSERT_TRUE(brain.ok());
  EXPECT_EQ(brain->shape, (std::vector<Index>{2, 2}));
  EXPECT_EQ(brain->values[0], 1.0);
  EXPECT_EQ(brain->values[1], -5.0);
  EXPECT_EQ(brain->values[2], static_cast<double>(std::bit_cast<float>(0x00010000u)));
  EXPECT_EQ(brain->values[3], std::numeric_limits<double>::infinity());
}

TEST(SafetensorsRoundTrip, BytesMatchTheReferenceLayout) {
  // What the reference serializer writes for these tensors: sorted names, compact JSON with
  // __metadata__ first, {"dtype","shape","data_offsets"} per entry, space padding to 8 bytes.
  ScratchDir dir;
  const std::vector<Scalar> b{1.0, 2.0};
  const std::vector<Scalar> a{-1.0, 0.5};
  ASSERT_TRUE(writeSafetensors(dir.file("l.safetensors"), {{"b", {2}, b}, {"a", {1, 2}, a}}, DType::F32).ok());
  const std::string bytes = testing::readBytes(dir.file("l.safetensors"));

  const std::string json =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  std::string padded = json;
  padded.append((8 - json.size() % 8) % 8, ' ');
  ASSERT_EQ(bytes.size(), 8 + padded.size() + 16);
  EXPECT_EQ(bytes.substr(0, 8), testing::lengthPrefix(padded.size()));
  EXPECT_EQ(bytes.substr(8, padded.size()), padded);
  EXPECT_EQ((8 + padded.size()) % 8, 0u);

  const float expectedData[4] = {-1.0f, 0.5f, 1.0f, 2.0f};  // a then b
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + padded.size(), expectedData, 16), 0);
}

TEST(SafetensorsRoundTrip, MetadataIsWrittenAndOptional) {
  ScratchDir dir;
  const std::vector<Scalar> v{1.0};
  ASSERT_TRUE(writeSafetensors(dir.file("m.safetensors"), {{"v", {1}, v}}, DType::F32,
                               {{"format", "pt"}, {"step", "12"}})
                  .ok());
  auto withMeta = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_TRUE(withMeta.ok());
  EXPECT_EQ(withMeta->metadata().at("step"), "12");

  ASSERT_TRUE(writeSafetensors(dir.file("n.safetensors"), {{"v", {1}, v}}, DType::F32, {}).ok());
  const std::string bytes = testing::readBytes(dir.file("n.safetensors"));
  EXPECT_EQ(bytes.find("__metadata__"), std::string::npos);
  auto without = SafetensorsFile::open(dir.file("n.safetensors"));
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(without->metadata().empty());
}

TEST(SafetensorsRoundTrip, WriterRefusesInconsistentInput) {
  ScratchDir dir;
  const std::vector<Scalar> three{1, 2, 3};
  auto wrongCount = writeSafetensors(dir.file("w.safetensors"), {{"x", {2, 2}, three}}, DType::F32);
  ASSERT_FALSE(wrongCount.ok());
  EXPECT_NE(wrongCount.error().message.find("holds 4 elements but 3 values"), std::string::npos);

  auto duplicate = writeSafetensors(dir.file("w.safetensors"), {{"x", {3}, three}, {"x", {3}, three}}, DType::F32);
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.error().message.find("two tensors named `x`"), std::string::npos);

  auto reserved = writeSafetensors(dir.file("w.safetensors"), {{"__metadata__", {3}, three}}, DType::F32);
  EXPECT_FALSE(reserved.ok());

  auto half = writeSafetensors(dir.file("w.safetensors"), {{"x", {3}, three}}, DType::F16);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.error().message.find("cannot save as F16"), std::string::npos);

  auto badUtf8 = writeSafetensors(dir.file("w.safetensors"), {{"x\xff", {3}, three}}, DType::F32);
  ASSERT_FALSE(badUtf8.ok());
  EXPECT_NE(badUtf8.error().message.find("UTF-8"), std::string::npos);

  EXPECT_FALSE(std::filesystem::exists(dir.file("w.safetensors")));
}

TEST(SafetensorsRoundTrip, DirectoryMeansItsModelSafetensors) {
  ScratchDir dir;
  const std::vector<Scalar> w{0.5, -0.5};
  ASSERT_TRUE(writeSafetensors(dir.file("model.safetensors"), {{"wpe.weight", {1, 2}, w}}, DType::F32).ok());
  auto data = readTensor(dir.path().string(), "wpe.weight");
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_EQ(data->values, w);
  auto file = TensorFile::open(dir.path().string());
  ASSERT_TRUE(file.ok());
  EXPECT_FALSE(file->isLlmc());
  EXPECT_EQ(file->path(), dir.file("model.safetensors"));
  EXPECT_EQ(file->names(), std::vector<std::string>{"wpe.weight"});
  EXPECT_TRUE(file->contains("wpe.weight"));
  EXPECT_EQ(file->info("wpe.weight")->shape, (std::vector<Index>{1, 2}));
}

TEST(SafetensorsRoundTrip, LargeTensorCrossesReadChunks) {
  // More elements than one read chunk (4 MiB of bytes) so chunked reads are exercised.
  ScratchDir dir;
  std::vector<Scalar> values(1'500'000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<Scalar>(i % 4099) - 2049.0;
  ASSERT_TRUE(writeSafetensors(dir.file("big.safetensors"), {{"big", {1500, 1000}, values}}, DType::F32).ok());
  auto data = readTensor(dir.file("big.safetensors"), "big");
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->values, values);
}

TEST(SafetensorsRoundTrip, ParsesFilesFromOtherWritersToo) {
  // Unsorted names, and data in another order than the names, are not what the reference writes
  // but are harmless; integer tensors beside float ones do not stop the float ones being read.
  // (Gaps and trailing bytes are not harmless: the reference refuses them, and so does Osprey,
  // SafetensorsMalformed.BytesNoTensorCovers.)
  ScratchDir dir;
  const std::string header =
      R"({"z":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F64","shape":[1],"data_offsets":[12,20]}})";
  std::string data(20, '\0');
  const float z = 3.5f;
  const double a = -0.125;
  std::memcpy(data.data() + 8, &z, 4);
  std::memcpy(data.data() + 12, &a, 8);
  testing::writeBytes(dir.file("o.safetensors"), testing::rawSafetensors(header, data));
  auto file = SafetensorsFile::open(dir.file("o.safetensors"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->names(), (std::vector<std::string>{"a", "ids", "z"}));
  EXPECT_EQ(file->read("z")->values, std::vector<Scalar>{3.5});
  EXPECT_EQ(file->read("a")->values, std::vector<Scalar>{-0.125});
  auto ids = file->read("ids");
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.error().message.find("tensor `ids` has dtype I64, which Osprey does not read"), std::string::npos);
}

}  // namespace
}  // namespace osprey::io
