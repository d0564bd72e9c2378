// Saving a file atomically: a reader, or the next run after a crash, sees the old file or the new
// one, whole, never a half-written mix.
//
// The bytes go to `<path>.tmp-<pid>`; commit() fsyncs that file, renames it over `path` (atomic
// on POSIX file systems) and fsyncs the directory so the rename itself is durable. Anything that
// fails before the rename leaves the previous `path` untouched and removes the temporary file.
// Checkpoints, exported weights and tokenized-data caches all save through here.
//
// Test hook: with OSPREY_FAIL_BEFORE_RENAME=1 in the environment (or
// setFailBeforeRenameForTesting(true)), commit() stops after the fsync and before the rename,
// reporting an error, as a process killed at that moment would leave things.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "osprey/result.hpp"

namespace osprey::io {

class AtomicFile {
 public:
  // Creates (truncating) the temporary file beside `path`.
  static Result<AtomicFile> create(const std::string& path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Not committed: the temporary file is removed and `path` stays as it was.
  ~AtomicFile();

  // Appends bytes (buffered; errors may surface on a later write or at commit).
  Result<void> write(const void* bytes, std::size_t count);
  Result<void> write(std::string_view bytes) { return write(bytes.data(), bytes.size()); }

  // Flush, fsync, rename over `path`, fsync the directory. Once only.
  Result<void> commit();

  const std::string& path() const { return m_path; }
  const std::string& temporaryPath() const { return m_temporaryPath; }

 private:
  AtomicFile(std::string path, std::string temporaryPath, int fd);
  Result<void> flush();
  void abandon();  // close and remove the temporary file

  std::string m_path;
  std::string m_temporaryPath;
  int m_fd = -1;
  std::vector<char> m_buffer;  // pending bytes, written in large chunks
  bool m_done = false;         // committed or abandoned
};

// The whole file in one call.
Result<void> writeFileAtomic(const std::string& path, std::string_view bytes);

// Why nothing can be created in directory `dir`, given the errno of the attempt, in the terms a
// user acts on: "the directory D is not writable (Read-only file system)", "the directory D does
// not exist", "D is not a directory", "no space is left ...", else the system's words. (The
// temporary file's name alone, `loss.csv.tmp-123: cannot create`, hides which directory it is.)
std::string cannotCreateIn(const std::string& dir, int error);

// The same for a create_directories(dir) that failed: said of the deepest part of dir that exists
// (where the creation was refused), "the directory /data is not writable (...)".
std::string cannotCreateDirectories(const std::string& dir, int error);

// The failure-injection switch (see the file comment); the environment variable also turns it on.
void setFailBeforeRenameForTesting(bool fail);

}  // namespace osprey::io
