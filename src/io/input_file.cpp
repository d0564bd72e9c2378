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
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fileError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  auto owned = std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return fileError(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  }
  if (S_ISDIR(info.st_mode)) return fileError(path, "is a directory, not a file");
  if (S_ISFIFO(info.st_mode)) return fileError(path, "is a FIFO (named pipe), not a regular file");
  if (S_ISSOCK(info.st_mode)) return fileError(path, "is a socket, not a regular file");
  if (S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)) return fileError(path, "is a device, not a regular file");
  if (!S_ISREG(info.st_mode)) return fileError(path, "is not a regular file");
  // Regular files ignore O_NONBLOCK; clearing it keeps reads plain whatever the file system does.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return InputFile(path, std::move(owned), static_cast<std::uint64_t>(info.st_size));
}

Result<std::string> readWholeFile(const std::string& path, std::uint64_t limit) {
  const InputFile file = OSPREY_TRY(InputFile::open(path));
  if (file.size() > limit)
    return fileError(path, fmt::format("is {} bytes, more than the {} this reader takes", file.size(), limit));
  std::string bytes(static_cast<std::size_t>(file.size()), '\0');
  OSPREY_CHECK(file.readAt(0, file.size(), reinterpret_cast<unsigned char*>(bytes.data())));
  return bytes;
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
