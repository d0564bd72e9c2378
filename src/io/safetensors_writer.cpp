// Writing safetensors files in the reference implementation's exact layout (see the header).
#include "osprey/io/safetensors_writer.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "osprey/io/atomic_file.hpp"

namespace osprey::io {
namespace {

using OrderedJson = nlohmann::ordered_json;

// What the header needs to know about one tensor, whatever form its values come in.
struct Planned {
  const std::string* name;
  DType dtype;
  const std::vector<Index>* shape;
  std::uint64_t bytes;
  std::size_t source;  // position in the caller's list
};

Result<std::uint64_t> elementCount(const std::string& name, const std::vector<Index>& shape) {
  std::uint64_t count = 1;
  for (Index dim : shape) {
    if (dim < 0) return Error{fmt::format("cannot save tensor `{}`: negative dimension {}", name, dim)};
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count)) {
      return Error{fmt::format("cannot save tensor `{}`: its shape overflows the element count", name)};
    }
  }
  return count;
}

Result<void> checkNames(const std::vector<Planned>& planned) {
  std::set<std::string_view> seen;
  for (const Planned& p : planned) {
    if (*p.name == "__metadata__") return Error{"cannot save a tensor named `__metadata__` (a reserved key)"};
    if (!seen.insert(*p.name).second) return Error{fmt::format("cannot save two tensors named `{}`", *p.name)};
  }
  return success();
}

// Sorted by name (byte order, as the reference sorts Rust strings), then the 8-byte length and
// the space-padded JSON header.
Result<std::string> headerBytes(std::vector<Planned>& planned, const std::map<std::string, std::string>& metadata) {
  OSPREY_CHECK(checkNames(planned));
  std::sort(planned.begin(), planned.end(), [](const Planned& a, const Planned& b) { return *a.name < *b.name; });

  OrderedJson root = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson entries = OrderedJson::object();
    for (const auto& [key, value] : metadata) entries[key] = value;
    root["__metadata__"] = std::move(entries);
  }
  std::uint64_t offset = 0;
  for (const Planned& p : planned) {
    OrderedJson shape = OrderedJson::array();
    for (Index dim : *p.shape) shape.push_back(static_cast<std::uint64_t>(dim));
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = std::string(dtypeName(p.dtype));
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = OrderedJson::array({offset, offset + p.bytes});
    root[*p.name] = std::move(entry);
    offset += p.bytes;
  }
  std::string json;
  try {
    json = root.dump();
  } catch (const std::exception&) {
    return Error{"cannot save: a tensor name or metadata entry is not valid UTF-8"};
  }
  json.append((8 - json.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  std::string bytes(8, '\0');
  const std::uint64_t length = json.size();
  for (int k = 0; k < 8; ++k) bytes[static_cast<std::size_t>(k)] = static_cast<char>(length >> (8 * k));
  return bytes + json;
}

}  // namespace

Result<void> writeSafetensors(const std::string& path, const std::vector<TensorToSave>& tensors, DType dtype,
                              const std::map<std::string, std::string>& metadata) {
  if (!dtypeWritable(dtype)) {
    return Error{fmt::format("{}: cannot save as {} (Osprey saves F64, F32 or BF16)", path, dtypeName(dtype))};
  }
  std::vector<Planned> planned;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorToSave& t = tensors[i];
    const std::uint64_t count = OSPREY_TRY(elementCount(t.name, t.shape));
    if (count != t.values.size()) {
      return Error{fmt::format("{}: cannot save tensor `{}`: shape [{}] holds {} elements but {} values were given",
                               path, t.name, fmt::join(t.shape, ", "), count, t.values.size())};
    }
    planned.push_back(Planned{&t.name, dtype, &t.shape, count * dtypeBytes(dtype), i});
  }
  const std::string header = OSPREY_TRY(headerBytes(planned, metadata));

  AtomicFile file = OSPREY_TRY(AtomicFile::create(path));
  OSPREY_CHECK(file.write(header));
  constexpr std::size_t kChunkElements = std::size_t{1} << 18;
  std::vector<unsigned char> chunk(kChunkElements * dtypeBytes(dtype));
  for (const Planned& p : planned) {
    const std::span<const Scalar> values = tensors[p.source].values;
    for (std::size_t first = 0; first < values.size(); first += kChunkElements) {
      const std::size_t count = std::min(kChunkElements, values.size() - first);
      encodeValues(dtype, values.data() + first, count, chunk.data());
      OSPREY_CHECK(file.write(chunk.data(), count * dtypeBytes(dtype)));
    }
  }
  return file.commit();
}

Result<std::string> encodeSafetensors(const std::vector<EncodedTensor>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  std::vector<Planned> planned;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const EncodedTensor& t = tensors[i];
    const std::uint64_t count = OSPREY_TRY(elementCount(t.name, t.shape));
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dtypeBytes(t.dtype)), &bytes) ||
        bytes != t.bytes.size()) {
      return Error{fmt::format("cannot encode tensor `{}`: shape and dtype need {} bytes, {} were given", t.name,
                               bytes, t.bytes.size())};
    }
    planned.push_back(Planned{&t.name, t.dtype, &t.shape, bytes, i});
  }
  std::string file = OSPREY_TRY(headerBytes(planned, metadata));
  for (const Planned& p : planned) file += tensors[p.source].bytes;
  return file;
}

}  // namespace osprey::io
