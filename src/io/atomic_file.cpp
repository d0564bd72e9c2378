// Atomic saves: temporary file, fsync, rename, fsync of the directory (see atomic_file.hpp).
#include "osprey/io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "osprey/io/input_file.hpp"

namespace osprey::io {
namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

std::atomic<bool> g_failBeforeRename{false};

bool failBeforeRename() {
  if (g_failBeforeRename.load()) return true;
  const char* flag = std::getenv("OSPREY_FAIL_BEFORE_RENAME");
  return flag != nullptr && std::string_view(flag) == "1";
}

std::string errnoText() { return std::strerror(errno); }

// The rename is only durable once the directory entry itself reaches the disk.
Result<void> syncDirectoryOf(const std::string& path) {
  std::filesystem::path directory = std::filesystem::path(path).parent_path();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fileError(path, "cannot open its directory to sync it: " + errnoText());
  const int rc = ::fsync(fd);
  const std::string why = rc != 0 ? errnoText() : "";
  ::close(fd);
  if (rc != 0) return fileError(path, "cannot sync its directory: " + why);
  return success();
}

}  // namespace

void setFailBeforeRenameForTesting(bool fail) { g_failBeforeRename.store(fail); }

AtomicFile::AtomicFile(std::string path, std::string temporaryPath, int fd)
    : m_path(std::move(path)), m_temporaryPath(std::move(temporaryPath)), m_fd(fd) {
  m_buffer.reserve(kBufferBytes);
}

std::string cannotCreateIn(const std::string& dir, int error) {
  const std::string why = std::strerror(error);
  switch (error) {
    case EACCES:
    case EPERM:
    case EROFS: return fmt::format("the directory {} is not writable ({})", dir, why);
    case ENOENT: return fmt::format("the directory {} does not exist", dir);
    case ENOTDIR: return fmt::format("{} is not a directory (part of the path is a file)", dir);
    case ENOSPC:
    case EDQUOT: return fmt::format("no space is left for a new file in {} ({})", dir, why);
    default: return fmt::format("nothing can be created in {}: {}", dir, why);
  }
}

std::string cannotCreateDirectories(const std::string& dir, int error) {
  std::error_code ec;
  std::filesystem::path at = dir;
  while (!std::filesystem::exists(at, ec) && at.has_parent_path() && at.parent_path() != at) at = at.parent_path();
  if (at.empty() || !std::filesystem::exists(at, ec)) at = ".";
  if (error == ENOTDIR || !std::filesystem::is_directory(at, ec))
    return fmt::format("{} is not a directory", at.string());
  return cannotCreateIn(at.string(), error);
}

Result<AtomicFile> AtomicFile::create(const std::string& path) {
  if (path.empty()) return Error{"cannot save: the output path is empty"};
  std::string temporaryPath = fmt::format("{}.tmp-{}", path, ::getpid());
  const int fd = ::open(temporaryPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int error = errno;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    const std::string directory = parent.empty() ? std::string(".") : parent.string();
    return fileError(path, fmt::format("cannot create {}: {}", temporaryPath, cannotCreateIn(directory, error)));
  }
  return AtomicFile(path, std::move(temporaryPath), fd);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : m_path(std::move(other.m_path)),
      m_temporaryPath(std::move(other.m_temporaryPath)),
      m_fd(other.m_fd),
      m_buffer(std::move(other.m_buffer)),
      m_done(other.m_done) {
  other.m_fd = -1;
  other.m_done = true;
}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    abandon();
    m_path = std::move(other.m_path);
    m_temporaryPath = std::move(other.m_temporaryPath);
    m_fd = other.m_fd;
    m_buffer = std::move(other.m_buffer);
    m_done = other.m_done;
    other.m_fd = -1;
    other.m_done = true;
  }
  return *this;
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = -1;
  if (!m_done && !m_temporaryPath.empty()) ::unlink(m_temporaryPath.c_str());
  m_done = true;
}

Result<void> AtomicFile::write(const void* bytes, std::size_t count) {
  if (m_done) return fileError(m_path, "write after the save was finished");
  const char* data = static_cast<const char*>(bytes);
  if (m_buffer.size() + count > kBufferBytes) OSPREY_CHECK(flush());
  if (count >= kBufferBytes) {
    // Large blocks go straight through rather than being copied into the buffer first.
    std::size_t done = 0;
    while (done < count) {
      const ssize_t wrote = ::write(m_fd, data + done, count - done);
      if (wrote < 0) {
        if (errno == EINTR) continue;
        return fileError(m_temporaryPath, "write failed: " + errnoText());
      }
      done += static_cast<std::size_t>(wrote);
    }
    return success();
  }
  m_buffer.insert(m_buffer.end(), data, data + count);
  return success();
}

Result<void> AtomicFile::flush() {
  std::size_t done = 0;
  while (done < m_buffer.size()) {
    const ssize_t wrote = ::write(m_fd, m_buffer.data() + done, m_buffer.size() - done);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return fileError(m_temporaryPath, "write failed: " + errnoText());
    }
    done += static_cast<std::size_t>(wrote);
  }
  m_buffer.clear();
  return success();
}

Result<void> AtomicFile::commit() {
  if (m_done) return fileError(m_path, "the save was already finished");
  Result<void> flushed = flush();
  if (!flushed.ok()) {
    abandon();
    return flushed.error();
  }
  if (::fsync(m_fd) != 0) {
    const std::string why = errnoText();
    abandon();
    return fileError(m_temporaryPath, "fsync failed: " + why);
  }
  if (::close(m_fd) != 0) {
    m_fd = -1;
    const std::string why = errnoText();
    abandon();
    return fileError(m_temporaryPath, "close failed: " + why);
  }
  m_fd = -1;
  if (failBeforeRename()) {
    abandon();
    return fileError(m_path, "save stopped before the rename (OSPREY_FAIL_BEFORE_RENAME); "
                             "the previous file is untouched");
  }
  if (::rename(m_temporaryPath.c_str(), m_path.c_str()) != 0) {
    const std::string why = errnoText();
    abandon();
    return fileError(m_path, fmt::format("cannot rename {} over it: {}", m_temporaryPath, why));
  }
  m_done = true;
  return syncDirectoryOf(m_path);
}

Result<void> writeFileAtomic(const std::string& path, std::string_view bytes) {
  AtomicFile file = OSPREY_TRY(AtomicFile::create(path));
  OSPREY_CHECK(file.write(bytes));
  return file.commit();
}

}  // namespace osprey::io
