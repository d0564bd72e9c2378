// A checkpoint file opened for positioned reads (see input_file.hpp for why not mmap).
#include "osprey/io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace osprey::io {

Error fileError(const std::string& path, const std::string& problem) {
  return Error{path + ": " + problem};
}

Result<InputFile> InputFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fileError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  auto owned = std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return fileError(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  }
  if (S_ISDIR(info.st_mode)) return fileError(path, "is a directory, not a checkpoint file");
  if (!S_ISREG(info.st_mode)) return fileError(path, "is not a regular file");
  return InputFile(path, std::move(owned), static_cast<std::uint64_t>(info.st_size));
}

Result<void> InputFile::readAt(std::uint64_t offset, std::uint64_t length, unsigned char* dest) const {
  std::uint64_t done = 0;
  while (done < length) {
    const std::uint64_t chunk = std::min<std::uint64_t>(length - done, std::uint64_t{1} << 30);
    const ssize_t got = ::pread(*m_fd, dest + done, chunk, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return fileError(m_path, fmt::format("read failed at byte {}: {}", offset + done,
                                           std::strerror(errno)));
    }
    if (got == 0) {
      return fileError(m_path, fmt::format("file ends at byte {}, but {} bytes were expected at "
                                           "byte {} (truncated?)",
                                           offset + done, length, offset));
    }
    done += static_cast<std::uint64_t>(got);
  }
  return success();
}

}  // namespace osprey::io
