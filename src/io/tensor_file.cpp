// readTensor and TensorFile: one entry point for any checkpoint, told apart by its first bytes.
#include "osprey/io/tensor_file.hpp"

#include <filesystem>
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

// llm.c files start with their int32 magic; anything else is treated as safetensors (whose
// first 8 bytes are a length), so a file of neither kind gets safetensors' precise complaint.
Result<bool> startsWithLlmcMagic(const InputFile& file) {
  if (file.size() < 4) return false;
  unsigned char first[4];
  OSPREY_CHECK(file.readAt(0, 4, first));
  const std::uint32_t magic = static_cast<std::uint32_t>(first[0]) | (static_cast<std::uint32_t>(first[1]) << 8) |
                              (static_cast<std::uint32_t>(first[2]) << 16) |
                              (static_cast<std::uint32_t>(first[3]) << 24);
  return magic == static_cast<std::uint32_t>(kLlmcMagic);
}

}  // namespace

Result<TensorFile> TensorFile::open(const std::string& path) {
  const std::string resolved = checkpointPath(path);
  const InputFile probe = OSPREY_TRY(InputFile::open(resolved));
  if (OSPREY_TRY(startsWithLlmcMagic(probe))) return TensorFile(OSPREY_TRY(LlmcCheckpoint::open(resolved)));
  return TensorFile(OSPREY_TRY(SafetensorsFile::open(resolved)));
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
