// A checkpoint file opened for reading at byte offsets.
//
// Reads go through pread rather than mmap: a file that is truncated (or shrinks while open) then
// gives an error naming the file, where a mapping would fault with SIGBUS. Only the bytes asked
// for are read, so taking one tensor from a 500 MB checkpoint reads that tensor and the header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "osprey/result.hpp"

namespace osprey::io {

// "path: problem": the shape of every checkpoint error.
Error fileError(const std::string& path, const std::string& problem);

class InputFile {
 public:
  // Fails (naming the path) if it does not exist, cannot be read, or is not a regular file. A FIFO,
  // socket or device in the file's place is refused at once, never waited on: the open does not
  // block, and the file's kind is checked before a byte is read.
  static Result<InputFile> open(const std::string& path);

  const std::string& path() const { return m_path; }
  std::uint64_t size() const { return m_size; }

  // Exactly `length` bytes from `offset` into dest, or an error saying the file is too short.
  Result<void> readAt(std::uint64_t offset, std::uint64_t length, unsigned char* dest) const;

 private:
  InputFile(std::string path, std::shared_ptr<const int> fd, std::uint64_t size)
      : m_path(std::move(path)), m_fd(std::move(fd)), m_size(size) {}

  std::string m_path;
  std::shared_ptr<const int> m_fd;  // closed when the last copy goes
  std::uint64_t m_size = 0;
};

// The whole of a regular file (InputFile::open's rules: never a FIFO, socket, device or directory),
// for the JSON and text files a run reads: config.json, vocab.json, merges.txt, training text,
// a run's manifests. At most `limit` bytes, so a huge file is an error, not an allocation failure.
Result<std::string> readWholeFile(const std::string& path, std::uint64_t limit = std::uint64_t{1} << 34);

}  // namespace osprey::io
