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
#include <nlohmann/json.hpp>

#include "gpt2/checkpoint/config.hpp"
#include "gpt2/checkpoint/load.hpp"
#include "gpt2/checkpoint/save.hpp"
#include "osprey/io/atomic_file.hpp"
#include "osprey/io/safetensors.hpp"
#include "osprey/io/safetensors_writer.hpp"
#include "osprey/io/input_file.hpp"

namespace fs = std::filesystem;

namespace gpt2::train {
namespace {

constexpr const char* kFormat = "osprey-gpt2-train 1";
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

std::string trainerStateJson(const TrainerState& s) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["step"] = s.step;
  j["data"] = {{"path", s.dataPath},     {"sha256", s.dataSha256}, {"tokens", s.dataTokens},
               {"position", s.dataPosition}, {"epoch", s.dataEpoch}};
  j["batch"] = {{"batch", s.batch}, {"seq", s.seq}, {"micro_batch", s.microBatch}};
  j["adamw"] = {{"lr", s.adamw.lr},   {"beta1", s.adamw.beta1},
                {"beta2", s.adamw.beta2}, {"eps", s.adamw.eps},
                {"weight_decay", s.adamw.weightDecay}};
  j["model"] = {{"label", s.label}, {"init_seed", s.seed}};
  j["rng"] = {{"state", nullptr},
              {"note", "the loop draws no random numbers: batches are read in order and there is no dropout"}};
  j["last_train_loss"] = s.lastTrainLoss;
  return j.dump(2) + "\n";
}

osprey::Result<TrainerState> parseTrainerState(const std::string& text, const std::string& label) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return osprey::Error{fmt::format("{}: not a JSON object", label)};
  try {
    if (j.at("format").get<std::string>() != kFormat)
      return osprey::Error{fmt::format("{}: format `{}` is not `{}`", label, j.at("format").get<std::string>(), kFormat)};
    TrainerState s;
    s.step = j.at("step").get<Index>();
    const auto& d = j.at("data");
    s.dataPath = d.at("path").get<std::string>();
    s.dataSha256 = d.at("sha256").get<std::string>();
    s.dataTokens = d.at("tokens").get<Index>();
    s.dataPosition = d.at("position").get<Index>();
    s.dataEpoch = d.at("epoch").get<Index>();
    const auto& b = j.at("batch");
    s.batch = b.at("batch").get<Index>();
    s.seq = b.at("seq").get<Index>();
    s.microBatch = b.at("micro_batch").get<Index>();
    const auto& a = j.at("adamw");
    s.adamw.lr = a.at("lr").get<double>();
    s.adamw.beta1 = a.at("beta1").get<double>();
    s.adamw.beta2 = a.at("beta2").get<double>();
    s.adamw.eps = a.at("eps").get<double>();
    s.adamw.weightDecay = a.at("weight_decay").get<double>();
    s.label = j.at("model").at("label").get<std::string>();
    s.seed = j.at("model").at("init_seed").get<std::uint64_t>();
    s.lastTrainLoss = j.at("last_train_loss").get<double>();
    if (s.step < 0 || s.dataPosition < 0 || s.dataEpoch < 0 || s.batch < 1 || s.seq < 1 || s.microBatch < 0)
      return osprey::Error{fmt::format("{}: negative or zero counts in the manifest", label)};
    return s;
  } catch (const nlohmann::json::exception& e) {
    return osprey::Error{fmt::format("{}: {}", label, e.what())};
  }
}

osprey::Result<void> saveTrainingCheckpoint(const fs::path& saveDir, const HostCheckpoint& c,
                                            const fs::path& tokenizerDir) {
  std::error_code ec;
  fs::create_directories(saveDir, ec);
  if (ec) return osprey::Error{fmt::format("{}: cannot create the save directory: {}", saveDir.string(), ec.message())};
  const fs::path target = checkpointDir(saveDir);
  const fs::path temporary = saveDir / fmt::format("checkpoint.tmp-{}", ::getpid());
  removeLeftovers(saveDir, target);
  fs::create_directories(temporary, ec);
  if (ec) return osprey::Error{fmt::format("{}: cannot create: {}", temporary.string(), ec.message())};

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
  if (!fs::exists(dir / kManifest)) {
    dir = checkpointDir(path);
    if (!fs::exists(dir / kManifest)) {
      // A save interrupted between its two renames leaves the previous checkpoint as .old-<pid>.
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(path, ec))
        if (entry.path().filename().string().rfind("checkpoint.old-", 0) == 0 &&
            fs::exists(entry.path() / kManifest))
          dir = entry.path();
    }
    if (!fs::exists(dir / kManifest))
      return osprey::Error{fmt::format("{}: no training checkpoint here (expected {} or checkpoint/{})",
                                       path.string(), kManifest, kManifest)};
  }
  HostCheckpoint c;
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
  return c;
}

}  // namespace gpt2::train
