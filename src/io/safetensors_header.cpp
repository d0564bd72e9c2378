// Parsing and checking a safetensors header: length prefix, JSON, every tensor entry, and the
// layout of the data section (in range, sizes matching shape x dtype, tiled exactly by the tensors).
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "osprey/io/json_text.hpp"
#include "osprey/io/safetensors.hpp"

namespace osprey::io {
namespace {

using Json = nlohmann::json;

// A real header nests three levels ({name: {shape: [..]}}); anything deeper than this is refused
// before parsing (json_text.hpp).
constexpr int kMaxJsonNesting = 64;

std::string shapeText(const std::vector<Index>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// A non-negative JSON integer that fits int64 (dims) or uint64 (offsets).
enum class Count { Ok, Negative, NotInteger };

Count readCount(const Json& value, std::uint64_t& out) {
  if (value.is_number_unsigned()) {
    out = value.get<std::uint64_t>();
    return Count::Ok;
  }
  if (value.is_number_integer()) {  // nlohmann stores most non-negative integers as unsigned
    const std::int64_t signedValue = value.get<std::int64_t>();
    if (signedValue < 0) return Count::Negative;
    out = static_cast<std::uint64_t>(signedValue);  // "-0"
    return Count::Ok;
  }
  if (value.is_number_float() && value.get<double>() < 0) return Count::Negative;
  return Count::NotInteger;
}

Result<std::vector<Index>> parseShape(const std::string& label, const std::string& name,
                                      const Json& entry) {
  const auto found = entry.find("shape");
  if (found == entry.end()) return fileError(label, fmt::format("tensor `{}` has no shape", name));
  if (!found->is_array()) {
    return fileError(label, fmt::format("tensor `{}` shape must be an array of non-negative integers", name));
  }
  std::vector<Index> shape;
  for (const Json& dim : *found) {
    std::uint64_t value = 0;
    switch (readCount(dim, value)) {
      case Count::Negative:
        return fileError(label, fmt::format("tensor `{}` has a negative dimension {} in its shape", name, dim.dump()));
      case Count::NotInteger:
        return fileError(label, fmt::format("tensor `{}` shape entry {} is not an integer", name, dim.dump()));
      case Count::Ok:
        break;
    }
    if (value > static_cast<std::uint64_t>(std::numeric_limits<Index>::max())) {
      return fileError(label, fmt::format("tensor `{}` dimension {} is too large", name, value));
    }
    shape.push_back(static_cast<Index>(value));
  }
  return shape;
}

struct Offsets {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Result<Offsets> parseOffsets(const std::string& label, const std::string& name, const Json& entry,
                             std::uint64_t dataBytes) {
  const auto found = entry.find("data_offsets");
  if (found == entry.end()) return fileError(label, fmt::format("tensor `{}` has no data_offsets", name));
  if (!found->is_array() || found->size() != 2) {
    return fileError(label, fmt::format("tensor `{}` data_offsets must be [begin, end]", name));
  }
  std::uint64_t bounds[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    switch (readCount((*found)[k], bounds[k])) {
      case Count::Negative:
        return fileError(label, fmt::format("tensor `{}` data_offsets {} are negative", name, found->dump()));
      case Count::NotInteger:
        return fileError(label, fmt::format("tensor `{}` data_offsets {} are not integers", name, found->dump()));
      case Count::Ok:
        break;
    }
  }
  const Offsets offsets{bounds[0], bounds[1]};
  if (offsets.begin > offsets.end) {
    return fileError(label, fmt::format("tensor `{}` data_offsets [{}, {}] end before they begin", name,
                                        offsets.begin, offsets.end));
  }
  if (offsets.end > dataBytes) {
    return fileError(label, fmt::format("tensor `{}` data_offsets [{}, {}] out of range (data section is {} bytes)",
                                        name, offsets.begin, offsets.end, dataBytes));
  }
  return offsets;
}

Result<DType> parseDtype(const std::string& label, const std::string& name, const Json& entry) {
  const auto found = entry.find("dtype");
  if (found == entry.end()) return fileError(label, fmt::format("tensor `{}` has no dtype", name));
  if (!found->is_string()) {
    return fileError(label, fmt::format("tensor `{}` dtype {} is not a string", name, found->dump()));
  }
  const std::string& text = found->get_ref<const std::string&>();
  const std::optional<DType> dtype = dtypeFromName(text);
  if (!dtype) return fileError(label, fmt::format("tensor `{}` has unknown dtype `{}`", name, text));
  return *dtype;
}

Result<TensorInfo> parseEntry(const std::string& label, const std::string& name, const Json& entry,
                              std::uint64_t dataBytes) {
  if (!entry.is_object()) {
    return fileError(label, fmt::format("tensor `{}` entry is not an object with dtype, shape and data_offsets", name));
  }
  TensorInfo info;
  info.name = name;
  info.dtype = OSPREY_TRY(parseDtype(label, name, entry));
  info.shape = OSPREY_TRY(parseShape(label, name, entry));
  const Offsets offsets = OSPREY_TRY(parseOffsets(label, name, entry, dataBytes));
  info.begin = offsets.begin;
  info.end = offsets.end;

  // elements = product of dims; bytes = elements * dtype size; both without overflow.
  std::uint64_t elements = 1;
  for (Index dim : info.shape) {
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dim), &elements) ||
        elements > static_cast<std::uint64_t>(std::numeric_limits<Index>::max())) {
      return fileError(label, fmt::format("tensor `{}` shape {} overflows the element count", name,
                                          shapeText(info.shape)));
    }
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dtypeBytes(info.dtype)), &bytes)) {
    return fileError(label, fmt::format("tensor `{}` shape {} overflows the byte count", name, shapeText(info.shape)));
  }
  if (bytes != info.end - info.begin) {
    return fileError(label, fmt::format("tensor `{}` data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {} bytes",
                                        name, info.begin, info.end, info.end - info.begin, shapeText(info.shape),
                                        dtypeName(info.dtype), bytes));
  }
  return info;
}

Result<std::map<std::string, std::string>> parseMetadata(const std::string& label, const Json& value) {
  if (!value.is_object()) return fileError(label, "`__metadata__` is not an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) {
      return fileError(label, fmt::format("`__metadata__` entry `{}` is not a string", key));
    }
    metadata.emplace(key, text.get<std::string>());
  }
  return metadata;
}

// The tensors tile the data section exactly, as the format requires: no two share a byte (an
// overlap), and no byte belongs to none (a gap between tensors, or bytes after the last), where
// data could hide that no reader of the tensors ever sees. Zero-byte tensors cover nothing and are
// left out. `dataStart` turns data offsets into file offsets for the message.
Result<void> checkLayout(const std::string& label, const std::vector<TensorInfo>& tensors, std::uint64_t dataBytes,
                         std::uint64_t dataStart) {
  std::vector<const TensorInfo*> byStart;
  for (const TensorInfo& t : tensors) {
    if (t.end > t.begin) byStart.push_back(&t);
  }
  std::sort(byStart.begin(), byStart.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
  });
  // `where`: "after the last tensor `x`" (empty when the header names no tensor holding bytes).
  const auto uncovered = [&](std::uint64_t from, std::uint64_t to, const std::string& where) {
    return fileError(label, fmt::format("data section bytes [{}, {}) (file bytes [{}, {})){} belong to no tensor{}: "
                                        "a safetensors data section holds its tensors and nothing else",
                                        from, to, dataStart + from, dataStart + to, where.empty() ? "" : " " + where,
                                        where.empty() ? " (the header names none that holds bytes)" : ""));
  };
  std::uint64_t covered = 0;  // every byte before this belongs to a tensor
  for (std::size_t i = 0; i < byStart.size(); ++i) {
    const TensorInfo& t = *byStart[i];
    if (i > 0 && t.begin < covered) {
      const TensorInfo& before = *byStart[i - 1];
      return fileError(label, fmt::format("tensors `{}` data_offsets [{}, {}] and `{}` data_offsets [{}, {}] overlap",
                                          before.name, before.begin, before.end, t.name, t.begin, t.end));
    }
    if (t.begin > covered) {
      return uncovered(covered, t.begin, i == 0 ? fmt::format("before the first tensor `{}`", t.name)
                                                : fmt::format("between `{}` and `{}`", byStart[i - 1]->name, t.name));
    }
    covered = t.end;
  }
  if (covered < dataBytes) {
    return uncovered(covered, dataBytes,
                     byStart.empty() ? std::string() : fmt::format("after the last tensor `{}`", byStart.back()->name));
  }
  return success();
}

}  // namespace

Index TensorInfo::elementCount() const {
  Index count = 1;
  for (Index dim : shape) count *= dim;
  return count;
}

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
  const auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                                   [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

Result<std::uint64_t> parseSafetensorsHeaderLength(const std::string& label,
                                                   std::span<const unsigned char> firstBytes,
                                                   std::uint64_t fileBytes) {
  if (fileBytes < 8 || firstBytes.size() < 8) {
    return fileError(label, fmt::format("file is {} bytes, shorter than the 8-byte safetensors header length",
                                        fileBytes));
  }
  std::uint64_t length = 0;
  for (int k = 7; k >= 0; --k) length = (length << 8) | firstBytes[static_cast<std::size_t>(k)];
  if (length > kMaxSafetensorsHeaderBytes) {
    return fileError(label, fmt::format("header length {} is absurd (the limit is {} bytes)", length,
                                        kMaxSafetensorsHeaderBytes));
  }
  if (length > fileBytes - 8) {
    return fileError(label, fmt::format("header length {} runs past the end of the file ({} bytes)", length,
                                        fileBytes));
  }
  return length;
}

Result<SafetensorsHeader> parseSafetensorsHeader(const std::string& label, std::string_view json,
                                                 std::uint64_t dataBytes) {
  // Duplicate keys, at the top (a tensor named twice) or inside an entry (two dtypes), are
  // refused there: nlohmann would keep the last, another reader the first.
  const Json root = OSPREY_TRY(parseJson(json, label, JsonRules{"header", kMaxJsonNesting}));
  if (!root.is_object()) return fileError(label, "header is not a JSON object");

  SafetensorsHeader header;
  header.dataBytes = dataBytes;
  for (const auto& [name, entry] : root.items()) {  // std::map order: tensors come sorted by name
    if (name == "__metadata__") {
      header.metadata = OSPREY_TRY(parseMetadata(label, entry));
      continue;
    }
    header.tensors.push_back(OSPREY_TRY(parseEntry(label, name, entry, dataBytes)));
  }
  OSPREY_CHECK(checkLayout(label, header.tensors, dataBytes, 8 + json.size()));
  return header;
}

Result<SafetensorsHeader> parseSafetensorsBytes(const std::string& label,
                                                std::span<const unsigned char> fileBytes) {
  const std::uint64_t length = OSPREY_TRY(parseSafetensorsHeaderLength(label, fileBytes, fileBytes.size()));
  const std::string_view json(reinterpret_cast<const char*>(fileBytes.data()) + 8, length);
  SafetensorsHeader header = OSPREY_TRY(parseSafetensorsHeader(label, json, fileBytes.size() - 8 - length));
  header.dataStart = 8 + length;
  return header;
}

}  // namespace osprey::io
