// Scratch files for checkpoint tests: a fresh directory per test, removed afterwards, and
// helpers to write and read raw bytes (malformed files are built byte by byte).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace osprey::io::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string leaf = std::string("osprey-io-") + (info ? info->test_suite_name() : "x") + "-" +
                             (info ? info->name() : "x") + "-" + std::to_string(::getpid());
    m_path = std::filesystem::temp_directory_path() / leaf;
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(m_path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (m_path / name).string(); }
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// 8-byte little-endian length, as safetensors starts.
inline std::string lengthPrefix(std::uint64_t length) {
  std::string bytes(8, '\0');
  for (int k = 0; k < 8; ++k) bytes[static_cast<std::size_t>(k)] = static_cast<char>(length >> (8 * k));
  return bytes;
}

// A safetensors file from a header text and a data section, with no checking at all.
inline std::string rawSafetensors(const std::string& header, const std::string& data) {
  return lengthPrefix(header.size()) + header + data;
}

}  // namespace osprey::io::testing
