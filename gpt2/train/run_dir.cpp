// Claiming a --save directory (see run_dir.hpp).
#include "gpt2/train/run_dir.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "osprey/io/atomic_file.hpp"  // cannotCreateIn

namespace fs = std::filesystem;

namespace gpt2::train {
namespace {

// What the lock file says about its holder ("pid 1234"), or "pid unknown".
std::string holderOf(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid(text, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return "pid unknown";
  return "pid " + pid;
}

// The save directory a --resume argument belongs to.
fs::path saveDirOf(const fs::path& resume) {
  std::error_code ec;
  if (fs::exists(resume / "trainer_state.json", ec)) return resume.parent_path();
  return resume;
}

bool sameDirectory(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

// Whether loss.csv records at least one step (a run that failed at its first step leaves the
// header alone: nothing to lose).
bool recordsSteps(const fs::path& csv) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line))
    if (!line.empty()) return true;
  return false;
}

// Whether a file can be made in saveDir, tried for real (access(2) says yes to root in a
// read-only or immutable directory): a run that could save nothing is refused before it trains,
// naming the directory, not a temporary file failing hours later.
osprey::Result<void> checkWritable(const fs::path& saveDir) {
  std::string probe = (saveDir / ".osprey-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    return osprey::Error{fmt::format("--save {}: nothing could be saved: {}", saveDir.string(),
                                     osprey::io::cannotCreateIn(saveDir.string(), errno))};
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace

RunDirectoryLock::~RunDirectoryLock() {
  if (m_fd >= 0) ::close(m_fd);  // closing the descriptor releases the flock
}

osprey::Result<std::unique_ptr<RunDirectoryLock>> lockRunDirectory(const fs::path& saveDir) {
  std::error_code ec;
  fs::create_directories(saveDir, ec);
  if (ec)
    return osprey::Error{fmt::format("--save {}: cannot create the directory: {}", saveDir.string(),
                                     osprey::io::cannotCreateDirectories(saveDir.string(), ec.value()))};
  if (!fs::is_directory(saveDir))
    return osprey::Error{fmt::format("--save {}: cannot create the directory (a file of that name exists)",
                                     saveDir.string())};
  OSPREY_CHECK(checkWritable(saveDir));
  const fs::path lockPath = saveDir / kLockFile;
  const int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return osprey::Error{fmt::format("--save {}: cannot open {}: {}", saveDir.string(), lockPath.string(),
                                     std::strerror(errno))};
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int cause = errno;
    const std::string holder = holderOf(fd);
    ::close(fd);
    if (cause == EWOULDBLOCK)
      return osprey::Error{fmt::format("--save {}: the directory is in use by another training run ({}, holding {}); "
                                       "wait for it to finish or save elsewhere",
                                       saveDir.string(), holder, lockPath.string())};
    return osprey::Error{fmt::format("--save {}: cannot lock {}: {}", saveDir.string(), lockPath.string(),
                                     std::strerror(cause))};
  }
  // Our pid, for the message a second run prints (the lock, not the text, is what excludes).
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // Not fatal: the lock holds without the pid.
  }
  return std::make_unique<RunDirectoryLock>(fd);
}

std::optional<fs::path> existingRun(const fs::path& saveDir) {
  std::error_code ec;
  if (fs::exists(saveDir / "checkpoint", ec)) return saveDir / "checkpoint";
  if (recordsSteps(saveDir / "loss.csv")) return saveDir / "loss.csv";
  for (const auto& entry : fs::directory_iterator(saveDir, ec))
    if (entry.path().filename().string().rfind("checkpoint.old-", 0) == 0) return entry.path();
  return std::nullopt;
}

bool resumesFrom(const fs::path& saveDir, const fs::path& resume) {
  return sameDirectory(saveDirOf(resume), saveDir);
}

osprey::Result<std::unique_ptr<RunDirectoryLock>> claimRunDirectory(const fs::path& saveDir,
                                                                     const std::optional<fs::path>& resume,
                                                                     bool overwrite) {
  auto lock = OSPREY_TRY(lockRunDirectory(saveDir));
  if (overwrite || (resume && resumesFrom(saveDir, *resume))) return lock;
  const auto found = existingRun(saveDir);
  if (found && found->filename() == "loss.csv")  // a history whose run saved no checkpoint: nothing to resume
    return osprey::Error{fmt::format("--save {}: the directory already holds a training run's loss history ({}) "
                                     "and no checkpoint; give --overwrite to replace it, or another --save directory",
                                     saveDir.string(), found->string())};
  if (found)
    return osprey::Error{fmt::format(
        "--save {}: the directory already holds a training run ({}); {}give --resume {} to continue it, "
        "--overwrite to replace it, or another --save directory",
        saveDir.string(), found->string(),
        resume ? fmt::format("this run resumes from {}, so saving there would replace that run; ", resume->string())
               : std::string(),
        saveDir.string())};
  return lock;
}

}  // namespace gpt2::train
