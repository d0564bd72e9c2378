// An opened safetensors file: header parsed once, tensors read one at a time by name.
#include <algorithm>

#include <fmt/format.h>

#include "osprey/io/safetensors.hpp"

namespace osprey::io {
namespace {

Result<void> checkReadable(const std::string& label, const TensorInfo& info) {
  if (!dtypeReadable(info.dtype)) {
    return fileError(label, fmt::format("tensor `{}` has dtype {}, which Osprey does not read "
                                        "(it reads F64, F32, F16 and BF16)",
                                        info.name, dtypeName(info.dtype)));
  }
  return success();
}

Error noSuchTensor(const std::string& label, std::string_view name) {
  return fileError(label, fmt::format("no tensor named `{}`", name));
}

}  // namespace

Result<TensorData> decodeTensor(const std::string& label, const TensorInfo& info,
                                std::span<const unsigned char> bytes) {
  OSPREY_CHECK(checkReadable(label, info));
  if (bytes.size() != info.end - info.begin) {
    return fileError(label, fmt::format("tensor `{}` needs {} bytes, {} were given", info.name,
                                        info.end - info.begin, bytes.size()));
  }
  TensorData data;
  data.shape = info.shape;
  data.values.resize(static_cast<std::size_t>(info.elementCount()));
  decodeValues(info.dtype, bytes.data(), data.values.size(), data.values.data());
  return data;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  InputFile file = OSPREY_TRY(InputFile::open(path));
  unsigned char prefix[8] = {};
  const std::uint64_t prefixBytes = std::min<std::uint64_t>(8, file.size());
  OSPREY_CHECK(file.readAt(0, prefixBytes, prefix));
  const std::uint64_t length =
      OSPREY_TRY(parseSafetensorsHeaderLength(path, std::span(prefix, prefixBytes), file.size()));
  std::string json(length, '\0');
  OSPREY_CHECK(file.readAt(8, length, reinterpret_cast<unsigned char*>(json.data())));
  SafetensorsHeader header = OSPREY_TRY(parseSafetensorsHeader(path, json, file.size() - 8 - length));
  header.dataStart = 8 + length;
  return SafetensorsFile(std::move(file), std::move(header));
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> names;
  names.reserve(m_header.tensors.size());
  for (const TensorInfo& t : m_header.tensors) names.push_back(t.name);
  return names;
}

Result<TensorInfo> SafetensorsFile::info(std::string_view name) const {
  const TensorInfo* found = m_header.find(name);
  if (found == nullptr) return noSuchTensor(path(), name);
  return *found;
}

Result<TensorData> SafetensorsFile::read(std::string_view name) const {
  const TensorInfo* found = m_header.find(name);
  if (found == nullptr) return noSuchTensor(path(), name);
  const TensorInfo& info = *found;
  OSPREY_CHECK(checkReadable(path(), info));

  TensorData data;
  data.shape = info.shape;
  data.values.resize(static_cast<std::size_t>(info.elementCount()));
  // Read and widen in bounded chunks so a large tensor never needs its raw bytes held twice.
  const std::size_t elementBytes = dtypeBytes(info.dtype);
  const std::size_t chunkElements = (std::size_t{1} << 22) / elementBytes;
  std::vector<unsigned char> chunk(std::min(data.values.size(), chunkElements) * elementBytes);
  for (std::size_t first = 0; first < data.values.size(); first += chunkElements) {
    const std::size_t count = std::min(chunkElements, data.values.size() - first);
    OSPREY_CHECK(m_file.readAt(m_header.dataStart + info.begin + first * elementBytes, count * elementBytes,
                               chunk.data()));
    decodeValues(info.dtype, chunk.data(), count, data.values.data() + first);
  }
  return data;
}

}  // namespace osprey::io
