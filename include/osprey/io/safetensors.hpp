// Reading safetensors files: the format Hugging Face checkpoints (`model.safetensors`) use.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header, then the data
// section. The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (byte offsets within the data section, which the tensors tile exactly: no byte in two tensors,
// none in no tensor); an optional "__metadata__" maps strings to strings. Keys are unique at every
// level (io/json_text.hpp).
//
// Everything in the header is checked before any value is read, and every failure is an Error
// naming the file and the problem ("model.safetensors: tensor `h.0.attn.c_attn.weight`
// data_offsets [0, 99] out of range (data section is 40 bytes)"): no input crashes the reader.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "osprey/config.hpp"
#include "osprey/io/dtype.hpp"
#include "osprey/io/input_file.hpp"
#include "osprey/io/tensor_data.hpp"
#include "osprey/result.hpp"

namespace osprey::io {

// The reference implementation refuses headers above 100 MB; so does Osprey.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// One tensor's entry in a header (or, for llm.c files, its place in the parameter block).
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Index> shape;  // e.g. {768, 2304}; {} is a scalar
  std::uint64_t begin = 0;   // byte range [begin, end) within the data section
  std::uint64_t end = 0;

  Index elementCount() const;  // product of shape (checked when the header was parsed)
};

struct SafetensorsHeader {
  std::uint64_t dataStart = 0;  // file offset of the data section: 8 + header length
  std::uint64_t dataBytes = 0;  // size of the data section
  std::map<std::string, std::string> metadata;  // "__metadata__", e.g. {"format": "pt"}
  std::vector<TensorInfo> tensors;              // sorted by name

  const TensorInfo* find(std::string_view name) const;
};

// The 8-byte header length, checked against the file size and the 100 MB limit.
// `label` names the file in errors.
Result<std::uint64_t> parseSafetensorsHeaderLength(const std::string& label,
                                                   std::span<const unsigned char> firstBytes,
                                                   std::uint64_t fileBytes);

// The JSON header text, checked against a data section of `dataBytes` bytes.
Result<SafetensorsHeader> parseSafetensorsHeader(const std::string& label, std::string_view json,
                                                 std::uint64_t dataBytes);

// A whole safetensors file held in memory (tests and the fuzz target).
Result<SafetensorsHeader> parseSafetensorsBytes(const std::string& label,
                                                std::span<const unsigned char> fileBytes);

// One tensor's values from its bytes (exactly info.end - info.begin of them).
Result<TensorData> decodeTensor(const std::string& label, const TensorInfo& info,
                                std::span<const unsigned char> bytes);

// An opened safetensors file: the header is parsed once; read() fetches one tensor's bytes.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return m_file.path(); }
  const SafetensorsHeader& header() const { return m_header; }
  const std::map<std::string, std::string>& metadata() const { return m_header.metadata; }

  std::vector<std::string> names() const;  // sorted
  bool contains(std::string_view name) const { return m_header.find(name) != nullptr; }
  Result<TensorInfo> info(std::string_view name) const;
  Result<TensorData> read(std::string_view name) const;

 private:
  SafetensorsFile(InputFile file, SafetensorsHeader header)
      : m_file(std::move(file)), m_header(std::move(header)) {}

  InputFile m_file;
  SafetensorsHeader m_header;
};

}  // namespace osprey::io
