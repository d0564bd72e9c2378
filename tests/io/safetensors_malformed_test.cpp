// Every malformed safetensors file gives an error naming the file and the problem; none crashes.
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/io_test_files.hpp"
#include "osprey/io/safetensors.hpp"
#include "osprey/io/tensor_file.hpp"

namespace osprey::io {
namespace {

using testing::rawSafetensors;
using testing::ScratchDir;

// Writes `bytes` as model.safetensors, opens it, and returns the error message ("" if it opened).
std::string openError(const ScratchDir& dir, const std::string& bytes) {
  const std::string path = dir.file("model.safetensors");
  testing::writeBytes(path, bytes);
  auto file = SafetensorsFile::open(path);
  return file.ok() ? std::string() : file.error().message;
}

// A header object around the given entries, e.g. header(R"("w": {...})").
std::string header(const std::string& entries) { return "{" + entries + "}"; }

struct Malformed {
  const char* what;
  std::string bytes;
  const char* expected;  // a phrase the error must contain
};

class SafetensorsMalformed : public ::testing::Test {
 protected:
  void expectError(const Malformed& c) {
    const std::string message = openError(m_dir, c.bytes);
    ASSERT_FALSE(message.empty()) << c.what << ": opened without complaint";
    EXPECT_EQ(message.rfind(m_dir.file("model.safetensors") + ": ", 0), 0u) << c.what << ": " << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.what << ": " << message;
  }
  ScratchDir m_dir;
};

const std::string kData16(16, '\0');

TEST_F(SafetensorsMalformed, LengthPrefix) {
  expectError({"empty file", "", "file is 0 bytes, shorter than the 8-byte safetensors header length"});
  expectError({"5-byte file", "abcde", "file is 5 bytes, shorter than the 8-byte"});
  expectError({"absurd length", testing::lengthPrefix(std::uint64_t{1} << 40) + "{}",
               "header length 1099511627776 is absurd (the limit is 100000000 bytes)"});
  expectError({"length past the end", testing::lengthPrefix(4096) + "{}      ",
               "header length 4096 runs past the end of the file (16 bytes)"});
  expectError({"all ones length", std::string(8, '\xff'), "is absurd"});
}

TEST_F(SafetensorsMalformed, HeaderJson) {
  expectError({"not JSON", rawSafetensors("{not json", ""), "header is not valid JSON"});
  expectError({"empty header", rawSafetensors("", ""), "header is not valid JSON"});
  expectError({"array header", rawSafetensors("[1, 2]", ""), "header is not a JSON object"});
  expectError({"string header", rawSafetensors(R"("x")", ""), "header is not a JSON object"});
  expectError({"invalid UTF-8", rawSafetensors("{\"\xff\": 1}", ""), "header is not valid JSON"});
  expectError({"nested too deep", rawSafetensors(std::string(100000, '[') + std::string(100000, ']'), ""),
               "header JSON nests deeper than 64 levels"});
  expectError({"trailing garbage", rawSafetensors("{} x", ""), "header is not valid JSON"});
}

TEST_F(SafetensorsMalformed, Metadata) {
  expectError({"metadata not an object", rawSafetensors(R"({"__metadata__": [1]})", ""),
               "`__metadata__` is not an object of strings"});
  expectError({"metadata value not a string", rawSafetensors(R"({"__metadata__": {"step": 3}})", ""),
               "`__metadata__` entry `step` is not a string"});
}

TEST_F(SafetensorsMalformed, Dtype) {
  expectError({"entry not an object", rawSafetensors(header(R"("w": 5)"), ""), "tensor `w` entry is not an object"});
  expectError({"no dtype", rawSafetensors(header(R"("w": {"shape": [1], "data_offsets": [0, 4]})"), kData16),
               "tensor `w` has no dtype"});
  expectError({"dtype number",
               rawSafetensors(header(R"("w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]})"), kData16),
               "tensor `w` dtype 7 is not a string"});
  expectError({"unknown dtype",
               rawSafetensors(header(R"("w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]})"), kData16),
               "tensor `w` has unknown dtype `F33`"});
}

TEST_F(SafetensorsMalformed, Shape) {
  expectError({"no shape", rawSafetensors(header(R"("w": {"dtype": "F32", "data_offsets": [0, 4]})"), kData16),
               "tensor `w` has no shape"});
  expectError({"shape not array",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]})"), kData16),
               "tensor `w` shape must be an array of non-negative integers"});
  expectError({"negative dim",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]})"), kData16),
               "tensor `w` has a negative dimension -2 in its shape"});
  expectError({"fractional dim",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]})"), kData16),
               "tensor `w` shape entry 1.5 is not an integer"});
  expectError({"string dim",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": ["2"], "data_offsets": [0, 8]})"), kData16),
               "is not an integer"});
  expectError({"dim beyond int64",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 4]})"),
                              kData16),
               "dimension 18446744073709551615 is too large"});
  expectError({"element count overflow",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [4294967296, 4294967296, 2], "data_offsets": [0, 4]})"),
                              kData16),
               "tensor `w` shape [4294967296, 4294967296, 2] overflows the element count"});
  expectError({"byte count overflow",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 4]})"),
                              kData16),
               "tensor `w` shape [4611686018427387904] overflows the byte count"});
}

TEST_F(SafetensorsMalformed, DataOffsets) {
  expectError({"no offsets", rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1]})"), kData16),
               "tensor `w` has no data_offsets"});
  expectError({"three offsets",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]})"), kData16),
               "tensor `w` data_offsets must be [begin, end]"});
  expectError({"negative offsets",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]})"), kData16),
               "tensor `w` data_offsets [-4,0] are negative"});
  expectError({"float offsets",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1], "data_offsets": [0.5, 4]})"), kData16),
               "are not integers"});
  expectError({"end before begin",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]})"), kData16),
               "tensor `w` data_offsets [8, 4] end before they begin"});
  expectError({"size mismatch",
               rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})"), kData16),
               "tensor `w` data_offsets [0, 8] hold 8 bytes, but shape [3] of F32 needs 12 bytes"});
  expectError({"overlap",
               rawSafetensors(header(R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                                     R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]})"),
                              kData16),
               "tensors `a` data_offsets [0, 8] and `b` data_offsets [4, 12] overlap"});
}

// The tensors tile the data section: a byte no tensor covers (before the first, between two,
// after the last) is an error naming the byte range, in the data section and in the file.
TEST_F(SafetensorsMalformed, BytesNoTensorCovers) {
  const std::string a4 = R"("a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  const char* tail = "belong to no tensor: a safetensors data section holds its tensors and nothing else";
  expectError({"trailing bytes", rawSafetensors(header(a4), std::string(7, '\0')),
               "data section bytes [4, 7) (file bytes "});
  expectError({"trailing bytes, named", rawSafetensors(header(a4), std::string(5, '\0')),
               "after the last tensor `a` belong to no tensor"});
  expectError({"a gap between two",
               rawSafetensors(header(a4 + R"(, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]})"), kData16),
               "data section bytes [4, 8)"});
  expectError({"a gap between two, named",
               rawSafetensors(header(a4 + R"(, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]})"), kData16),
               "between `a` and `b` belong to no tensor"});
  expectError({"bytes before the first",
               rawSafetensors(header(R"("a": {"dtype": "F32", "shape": [3], "data_offsets": [4, 16]})"), kData16),
               "data section bytes [0, 4)"});
  expectError({"no tensors but data", rawSafetensors("{}", kData16), "data section bytes [0, 16)"});
  expectError({"only empty tensors but data",
               rawSafetensors(header(R"("e": {"dtype": "F32", "shape": [0], "data_offsets": [3, 3]})"), kData16),
               "data section bytes [0, 16)"});
  expectError({"one byte left over", rawSafetensors(header(a4), std::string(5, '\0')), tail});
  // The message's file offsets count the 8-byte length and the header.
  const std::string h = header(a4);
  const std::string bytes = rawSafetensors(h, std::string(6, '\0'));
  EXPECT_NE(openError(m_dir, bytes).find(fmt::format("data section bytes [4, 6) (file bytes [{}, {}))", 8 + h.size() + 4,
                                                     8 + h.size() + 6)),
            std::string::npos)
      << openError(m_dir, bytes);
  // Exact tiling, in any order of names, with empty tensors anywhere, opens.
  const std::string tiled = header(R"("z": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                                   R"("e": {"dtype": "F32", "shape": [0, 5], "data_offsets": [8, 8]},)"
                                   R"("a": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]})");
  EXPECT_EQ(openError(m_dir, rawSafetensors(tiled, kData16)), "");
  EXPECT_EQ(openError(m_dir, rawSafetensors("{}", "")), "");
  // An overlap is still an overlap, not a gap.
  expectError({"overlap after a gap-free start",
               rawSafetensors(header(a4 + R"(, "b": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]})"), kData16),
               "overlap"});
}

// Keys given twice: a tensor named twice (nlohmann would keep the last silently), a field twice
// inside an entry, a metadata key twice.
TEST_F(SafetensorsMalformed, KeysGivenTwice) {
  const std::string a = R"("a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  expectError({"tensor twice", rawSafetensors(header(a + "," + a), std::string(4, '\0')),
               "header: key `a` is given twice"});
  expectError({"tensor twice, different offsets",
               rawSafetensors(header(a + R"(, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]})"),
                              std::string(8, '\0')),
               "header: key `a` is given twice"});
  expectError({"dtype twice",
               rawSafetensors(header(R"("a": {"dtype": "F64", "shape": [1], "dtype": "F32", "data_offsets": [0, 4]})"),
                              std::string(4, '\0')),
               "header: key `dtype` is given twice in `a`"});
  expectError({"offsets twice",
               rawSafetensors(header(R"("a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "data_offsets": [0, 4]})"),
                              std::string(4, '\0')),
               "header: key `data_offsets` is given twice in `a`"});
  expectError({"metadata key twice",
               rawSafetensors(header(R"("__metadata__": {"format": "pt", "format": "np"}, )" + a), std::string(4, '\0')),
               "header: key `format` is given twice in `__metadata__`"});
  expectError({"metadata twice",
               rawSafetensors(header(R"("__metadata__": {}, "__metadata__": {}, )" + a), std::string(4, '\0')),
               "header: key `__metadata__` is given twice"});
  expectError({"escaped twin", rawSafetensors(header(a + R"(, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})"),
                                              std::string(4, '\0')),
               "header: key `a` is given twice"});
  expectError({"number out of range, named",
               rawSafetensors(header(R"("a": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]})"), std::string(4, '\0')),
               "header: `a.shape[0]`: a number is out of range"});
}

TEST_F(SafetensorsMalformed, OffsetsOutOfRangeMessageIsExact) {
  // A data section of 40 bytes, a tensor claiming 99.
  const std::string bytes = rawSafetensors(
      header(R"("h.0.attn.c_attn.weight": {"dtype": "F32", "shape": [3, 33], "data_offsets": [0, 99]})"),
      std::string(40, '\0'));
  EXPECT_EQ(openError(m_dir, bytes),
            m_dir.file("model.safetensors") +
                ": tensor `h.0.attn.c_attn.weight` data_offsets [0, 99] out of range (data section is 40 bytes)");
}

TEST_F(SafetensorsMalformed, TruncatedDataSection) {
  // A well-formed file cut short: its last tensor now runs past the end of the data.
  const std::string whole = rawSafetensors(
      header(R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
             R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]})"),
      kData16);
  expectError({"truncated", whole.substr(0, whole.size() - 3), "tensor `b` data_offsets [8, 16] out of range"});
}

TEST(SafetensorsMissing, FileAndTensor) {
  ScratchDir dir;
  auto missingFile = readTensor(dir.file("nope.safetensors"), "w");
  ASSERT_FALSE(missingFile.ok());
  EXPECT_EQ(missingFile.error().message, dir.file("nope.safetensors") + ": cannot open: No such file or directory");

  auto emptyDir = readTensor(dir.path().string(), "w");
  ASSERT_FALSE(emptyDir.ok());
  EXPECT_EQ(emptyDir.error().message, dir.file("model.safetensors") + ": cannot open: No such file or directory");

  testing::writeBytes(dir.file("model.safetensors"),
                      rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})"),
                                     std::string(4, '\0')));
  auto missingTensor = readTensor(dir.path().string(), "h.0.ln_1.weight");
  ASSERT_FALSE(missingTensor.ok());
  EXPECT_EQ(missingTensor.error().message, dir.file("model.safetensors") + ": no tensor named `h.0.ln_1.weight`");

  std::filesystem::create_directories(dir.path() / "sub" / "model.safetensors");
  auto directory = SafetensorsFile::open((dir.path() / "sub" / "model.safetensors").string());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("is a directory"), std::string::npos);
}

TEST(SafetensorsBytes, InMemoryParserAgreesWithTheFileReader) {
  const std::string bytes =
      rawSafetensors(header(R"("w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})"), std::string(4, '\0'));
  auto parsed = parseSafetensorsBytes(
      "mem", std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->dataBytes, 4u);
  ASSERT_NE(parsed->find("w"), nullptr);
  auto bad = parseSafetensorsBytes("mem", std::span<const unsigned char>());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "mem: file is 0 bytes, shorter than the 8-byte safetensors header length");
}

}  // namespace
}  // namespace osprey::io
