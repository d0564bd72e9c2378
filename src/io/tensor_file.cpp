// readTensor and TensorFile: one entry point for any checkpoint, told apart by its first bytes.
#include "osprey/io/tensor_file.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "osprey/io/input_file.hpp"
#include "osprey/io/llmc_checkpoint.hpp"
#include "osprey/io/safetensors.hpp"

namespace osprey::io {
namespace {

// A Hugging Face model directory holds its weights in model.safetensors.
std::string checkpointPath(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) return (std::filesystem::path(path) / "model.safetensors").string();
  return path;
}

// The file's first int32 (llm.c's magic number), or nullopt for a file shorter than 4 bytes.
Result<std::optional<std::int32_t>> firstInt32(const InputFile& file) {
  if (file.size() < 4) return std::optional<std::int32_t>();
  unsigned char first[4];
  OSPREY_CHECK(file.readAt(0, 4, first));
  const std::uint32_t magic = static_cast<std::uint32_t>(first[0]) | (static_cast<std::uint32_t>(first[1]) << 8) |
                              (static_cast<std::uint32_t>(first[2]) << 16) |
                              (static_cast<std::uint32_t>(first[3]) << 24);
  return std::optional<std::int32_t>(static_cast<std::int32_t>(magic));
}

// Whether the first 8 bytes could be a safetensors header length (what a safetensors file is
// recognised by: a length within the limit and the file).
Result<bool> hasSafetensorsLength(const InputFile& file) {
  unsigned char prefix[8] = {};
  const std::uint64_t bytes = std::min<std::uint64_t>(8, file.size());
  OSPREY_CHECK(file.readAt(0, bytes, prefix));
  return parseSafetensorsHeaderLength(file.path(), std::span(prefix, bytes), file.size()).ok();
}

}  // namespace

// llm.c files start with their int32 magic; anything else is read as safetensors. A file that is
// neither (a damaged llm.c magic, or no safetensors length either) is named as such, with the
// magic found: "header length 12884901927 is absurd" would not tell a user their .bin is broken.
Result<TensorFile> TensorFile::open(const std::string& path) {
  const std::string resolved = checkpointPath(path);
  const InputFile probe = OSPREY_TRY(InputFile::open(resolved));
  const std::optional<std::int32_t> magic = OSPREY_TRY(firstInt32(probe));
  if (magic == kLlmcMagic) return TensorFile(OSPREY_TRY(LlmcCheckpoint::open(resolved)));
  auto safetensors = SafetensorsFile::open(resolved);
  if (safetensors.ok()) return TensorFile(std::move(*safetensors));
  const bool namedBin = std::filesystem::path(resolved).extension() == ".bin";
  if (!namedBin && OSPREY_TRY(hasSafetensorsLength(probe))) return safetensors.error();
  // A .bin is meant as llm.c: that it is not one comes first, and how its bytes fail as
  // safetensors would only distract. Another name is meant as safetensors: its reason first.
  const std::string found = magic ? fmt::format("its magic number is {} (0x{:08x})", *magic, static_cast<std::uint32_t>(*magic))
                                  : fmt::format("it is {} bytes, too short for a magic number", probe.size());
  const std::string llmc = fmt::format("{}, and llm.c's is {} (0x{:08x})", found, kLlmcMagic,
                                       static_cast<std::uint32_t>(kLlmcMagic));
  if (namedBin) return fileError(resolved, "not an llm.c checkpoint: " + llmc + "; nor is it a safetensors file");
  return Error{fmt::format("{}; nor is it an llm.c checkpoint ({})", safetensors.error().message, llmc)};
}

const std::string& TensorFile::path() const {
  return std::visit([](const auto& file) -> const std::string& { return file.path(); }, m_file);
}

std::vector<std::string> TensorFile::names() const {
  return std::visit([](const auto& file) { return file.names(); }, m_file);
}

bool TensorFile::contains(std::string_view name) const {
  return std::visit([&](const auto& file) { return file.contains(name); }, m_file);
}

Result<TensorInfo> TensorFile::info(std::string_view name) const {
  return std::visit([&](const auto& file) { return file.info(name); }, m_file);
}

Result<TensorData> TensorFile::read(std::string_view name) const {
  return std::visit([&](const auto& file) { return file.read(name); }, m_file);
}

Result<TensorData> readTensor(const std::string& path, const std::string& name) {
  const TensorFile file = OSPREY_TRY(TensorFile::open(path));
  return file.read(name);
}

}  // namespace osprey::io
