// Training checkpoints (see train_checkpoint.hpp for the layout and the atomic swap).
#include "gpt2/train/checkpoint.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "gpt2/checkpoint/config.hpp"
#include "gpt2/checkpoint/load.hpp"
#include "gpt2/checkpoint/save.hpp"
#include "gpt2/model/finite_weights.hpp"
#include "gpt2/train/leftovers.hpp"
#include "osprey/io/atomic_file.hpp"
#include "osprey/io/safetensors.hpp"
#include "osprey/io/safetensors_writer.hpp"
#include "osprey/io/input_file.hpp"

namespace fs = std::filesystem;

namespace gpt2::train {
namespace {

constexpr const char* kManifest = "trainer_state.json";
constexpr const char* kOptimizer = "optimizer.safetensors";
constexpr const char* kModel = "model.safetensors";

bool g_failBeforeSwap = false;

bool failBeforeSwap() {
  const char* env = std::getenv("OSPREY_FAIL_BEFORE_CHECKPOINT_SWAP");
  return g_failBeforeSwap || (env && std::string(env) == "1");
}

osprey::Error systemError(const fs::path& path, const std::string& what) {
  return osprey::Error{fmt::format("{}: {}: {}", path.string(), what, std::strerror(errno))};
}

// fsync a directory, so the renames inside it are durable.
osprey::Result<void> syncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return systemError(dir, "cannot open directory to sync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return systemError(dir, "cannot sync directory");
  return {};
}

// Atomically exchanges two existing paths; false (errno set) when the file system cannot.
bool exchangePaths(const fs::path& a, const fs::path& b) {
#if defined(SYS_renameat2)
  constexpr unsigned kRenameExchange = 2;  // RENAME_EXCHANGE (linux/fs.h)
  return ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), kRenameExchange) == 0;
#else
  errno = ENOSYS;
  return false;
#endif
}

std::vector<osprey::io::TensorToSave> momentTensors(const HostWeights& m, const HostWeights& v) {
  std::vector<osprey::io::TensorToSave> out;
  const auto specs = parameterSpecs(m.config);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    out.push_back({"m." + specs[i].name, specs[i].shape, std::span<const Scalar>(m.tensors[i].values)});
    out.push_back({"v." + specs[i].name, specs[i].shape, std::span<const Scalar>(v.tensors[i].values)});
  }
  return out;
}

// The first NaN or infinity among the weights and moments, as an error (`what` before, `after`
// after the element's name).
osprey::Result<void> checkFinite(const HostCheckpoint& c, const std::string& what, const std::string& after) {
  for (auto [w, prefix] : {std::pair{&c.weights, ""}, std::pair{&c.m, "m."}, std::pair{&c.v, "v."}})
    if (const auto bad = firstNonFinite(*w, prefix))
      return osprey::Error{fmt::format("{}: {}{}", what, *bad, after)};
  return {};
}

// Removes leftovers of saves that were interrupted (temporary and old checkpoints of any pid),
// keeping `keep`.
void removeLeftovers(const fs::path& saveDir, const fs::path& keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(saveDir, ec)) {
    const std::string name = entry.path().filename().string();
    if ((name.rfind("checkpoint.tmp-", 0) == 0 || name.rfind("checkpoint.old-", 0) == 0) &&
        entry.path() != keep)
      fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

void setFailBeforeCheckpointSwapForTesting(bool fail) { g_failBeforeSwap = fail; }

fs::path checkpointDir(const fs::path& saveDir) { return saveDir / "checkpoint"; }

osprey::Result<void> saveTrainingCheckpoint(const fs::path& saveDir, const HostCheckpoint& c,
                                            const fs::path& tokenizerDir) {
  std::error_code ec;
  fs::create_directories(saveDir, ec);
  if (ec)
    return osprey::Error{fmt::format("{}: cannot create the save directory: {}", saveDir.string(),
                                     osprey::io::cannotCreateDirectories(saveDir.string(), ec.value()))};
  const fs::path target = checkpointDir(saveDir);
  // Numbers that are not finite are never saved: they would replace a checkpoint that can still
  // be trained from with one that cannot.
  OSPREY_CHECK(checkFinite(c, fmt::format("refusing to save step {} to {}", c.state.step, target.string()),
                           fmt::format("; {} is left as it was", saveDir.string())));
  const fs::path temporary = saveDir / fmt::format("checkpoint.tmp-{}", ::getpid());
  // A save killed between its two renames left no checkpoint/, only old-*: put the newest back
  // first, so that the clean-up below cannot delete the last good checkpoint.
  if (!fs::exists(target))
    if (const auto old = newestOldCheckpoint(saveDir); old && ::rename(old->dir.c_str(), target.c_str()) != 0)
      return systemError(old->dir, "cannot move the previous checkpoint back into place");
  removeLeftovers(saveDir, target);
  fs::create_directories(temporary, ec);
  if (ec)
    return osprey::Error{fmt::format("{}: cannot create: {}", temporary.string(),
                                     osprey::io::cannotCreateIn(saveDir.string(), ec.value()))};

  // Everything goes into the temporary directory first; each file is fsynced by its writer.
  OSPREY_CHECK(saveHfDirectory(temporary, c.weights, osprey::io::DType::F64, tokenizerDir));
  OSPREY_CHECK(osprey::io::writeSafetensors((temporary / kOptimizer).string(), momentTensors(c.m, c.v),
                                            osprey::io::DType::F64,
                                            {{"format", "osprey-adamw"}, {"step", std::to_string(c.state.step)}}));
  OSPREY_CHECK(osprey::io::writeFileAtomic((temporary / kManifest).string(), trainerStateJson(c.state)));
  OSPREY_CHECK(syncDirectory(temporary));

  if (failBeforeSwap())
    return osprey::Error{fmt::format("{}: save stopped before the swap (failure injected for testing)",
                                     temporary.string())};

  if (!fs::exists(target)) {
    if (::rename(temporary.c_str(), target.c_str()) != 0) return systemError(target, "cannot rename the new checkpoint into place");
  } else if (exchangePaths(temporary, target)) {
    // `temporary` now holds the previous checkpoint.
    fs::remove_all(temporary, ec);
  } else {
    // No atomic exchange here: move the old one aside (loaders accept it while `target` is
    // missing), move the new one in, then drop the old one.
    const fs::path old = saveDir / fmt::format("checkpoint.old-{}", ::getpid());
    if (::rename(target.c_str(), old.c_str()) != 0) return systemError(target, "cannot move the previous checkpoint aside");
    if (::rename(temporary.c_str(), target.c_str()) != 0) {
      ::rename(old.c_str(), target.c_str());
      return systemError(target, "cannot rename the new checkpoint into place");
    }
    fs::remove_all(old, ec);
  }
  return syncDirectory(saveDir);
}

osprey::Result<HostCheckpoint> loadTrainingCheckpoint(const fs::path& path) {
  fs::path dir = path;
  std::string note;
  if (!fs::exists(dir / kManifest)) {
    dir = checkpointDir(path);
    if (!fs::exists(dir / kManifest)) {
      // A save interrupted between its two renames leaves the previous checkpoint as .old-<pid>.
      if (const auto old = newestOldCheckpoint(path)) {
        dir = old->dir;
        note = fmt::format("note: {} has no checkpoint/ (a save was interrupted); using {} (step {}){}",
                           path.string(), dir.string(), old->step,
                           old->candidates > 1 ? fmt::format(", the newest by step of {} left behind", old->candidates)
                                               : std::string());
      }
    }
    if (!fs::exists(dir / kManifest))
      return osprey::Error{fmt::format("{}: no training checkpoint here (expected {} or checkpoint/{})",
                                       path.string(), kManifest, kManifest)};
  }
  HostCheckpoint c;
  c.source = dir;
  c.note = note;
  const std::string manifest = OSPREY_TRY(osprey::io::readWholeFile((dir / kManifest).string()));
  c.state = OSPREY_TRY(parseTrainerState(manifest, (dir / kManifest).string()));
  const Config config = OSPREY_TRY(readHfConfig(dir / "config.json"));
  c.weights = OSPREY_TRY(loadWeightsFile((dir / kModel).string(), config));

  const std::string optimizerPath = (dir / kOptimizer).string();
  auto file = OSPREY_TRY(osprey::io::SafetensorsFile::open(optimizerPath));
  c.m = HostWeights{config, {}};
  c.v = HostWeights{config, {}};
  for (const ParameterSpec& spec : parameterSpecs(config)) {
    for (auto [prefix, into] : {std::pair{"m.", &c.m}, std::pair{"v.", &c.v}}) {
      auto t = OSPREY_TRY(file.read(prefix + spec.name));
      if (static_cast<Index>(t.values.size()) != spec.elements())
        return osprey::Error{fmt::format("{}: `{}{}` has {} values, expected {}", optimizerPath, prefix,
                                         spec.name, t.values.size(), spec.elements())};
      into->tensors.push_back(HostTensor{std::move(t.values)});
    }
  }
  // A checkpoint holding NaN or infinities (written by hand, or by another program) cannot be
  // trained from: every step after would be NaN.
  OSPREY_CHECK(checkFinite(c, fmt::format("{}: cannot resume", dir.string()),
                           ": a checkpoint must hold finite numbers"));
  return c;
}

}  // namespace gpt2::train
