// Item: messages that mislead. Each says what is wrong in the user's terms: a damaged llm.c magic
// says the file is not an llm.c checkpoint (the magic found and llm.c's); a save where nothing
// can be written names the directory that is not writable (not a temporary file); --backend fast
// with OSPREY_GPU=host never advises OSPREY_GPU=host; one token missing from vocab.json names the
// id without a token (not <|endoftext|>, which only looks too high); and --resume with another
// data file names both files.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gpt2/checkpoint/save.hpp"
#include "gpt2/cli/run.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/temp_dir.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "hostile_helpers.hpp"
#include "osprey/io/atomic_file.hpp"
#include "osprey/io/llmc_checkpoint.hpp"

namespace fs = std::filesystem;
using gpt2::testing::ScopedEnv;
using gpt2::testing::TempDir;
using namespace osprey::testing::train;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A directory this process cannot create files in: mode 0555, and, for root (whom modes do not
// stop), the immutable attribute too. `ready()` says whether either took (a file system without
// the attribute, run as root, cannot be made unwritable: the test then says so and skips).
class UnwritableDir {
 public:
  explicit UnwritableDir(fs::path dir) : m_dir(std::move(dir)) {
    fs::create_directories(m_dir);
    ::chmod(m_dir.c_str(), 0555);
    if (::geteuid() == 0) setImmutable(true);
  }
  ~UnwritableDir() {
    if (m_immutable) setImmutable(false);
    ::chmod(m_dir.c_str(), 0755);
  }
  UnwritableDir(const UnwritableDir&) = delete;
  UnwritableDir& operator=(const UnwritableDir&) = delete;

  bool ready() const {
    const std::string probe = (m_dir / "probe").string();
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return true;
    ::close(fd);
    ::unlink(probe.c_str());
    return false;
  }
  const fs::path& path() const { return m_dir; }

 private:
  void setImmutable(bool on) {
    const int fd = ::open(m_dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;
    int flags = 0;
    if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
      flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
      if (::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0) m_immutable = on;
    }
    ::close(fd);
  }

  fs::path m_dir;
  bool m_immutable = false;
};

}  // namespace

// A .bin whose magic is damaged is named as not an llm.c checkpoint, with both magics; so is any
// file that is neither kind. (It was "header length ... is absurd": safetensors' words.)
TEST(HostileMessages, ABadLlmcMagicSaysTheFileIsNotAnLlmcCheckpoint) {
  TempDir dir;
  const gpt2::HostWeights w = gpt2::initialWeights(gpt2::kGpt2Tiny, gpt2::kDefaultSeed);
  std::map<std::string, osprey::io::TensorData> tensors;
  const auto specs = gpt2::parameterSpecs(gpt2::kGpt2Tiny);
  for (std::size_t i = 0; i < specs.size(); ++i) tensors[specs[i].name] = osprey::io::TensorData{specs[i].shape, w.tensors[i].values};
  const fs::path bin = dir / "gpt2_tiny.bin";
  const osprey::io::LlmcConfig config{128, 50257, 2, 2, 64, 50304};
  ASSERT_TRUE(osprey::io::writeLlmcCheckpoint(bin.string(), config, tensors).ok());
  const std::string good = readText(bin);

  struct Case {
    const char* what;
    std::string bytes;
    std::string expected;
  };
  // 20240326 is 0x0134d7c6; the byte-swapped one is what a big-endian writer would leave.
  auto withMagic = [&](std::uint32_t magic) {
    std::string b = good;
    for (int k = 0; k < 4; ++k) b[static_cast<std::size_t>(k)] = static_cast<char>(magic >> (8 * k));
    return b;
  };
  const std::string theirs = "and llm.c's is 20240326 (0x0134d7c6); nor is it a safetensors file";
  const std::vector<Case> cases{
      {"off by one", withMagic(20240327), "not an llm.c checkpoint: its magic number is 20240327 (0x0134d7c7), " + theirs},
      {"zero", withMagic(0), "not an llm.c checkpoint: its magic number is 0 (0x00000000), " + theirs},
      {"byte-swapped", withMagic(0xc6d73401u), "its magic number is -958974975 (0xc6d73401), " + theirs},
      {"small, a plausible length", withMagic(100), "its magic number is 100 (0x00000064), " + theirs},
      {"three bytes", good.substr(0, 3), "not an llm.c checkpoint: it is 3 bytes, too short for a magic number"},
      {"text", "hello, this is not a checkpoint at all", "its magic number is 1819043176 (0x6c6c6568)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    writeText(bin, c.bytes);
    const CliRun r = runOsprey({"generate", "--model", bin.string(), "--prompt", "Hi", "--tokens", "1"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find(bin.string() + ": "), std::string::npos) << r.err;
    EXPECT_TRUE(contains(r.err, c.expected)) << r.err;
    EXPECT_FALSE(contains(r.err, "absurd")) << r.err;
  }
  // A model directory's model.safetensors that is neither kind says both, safetensors' reason first.
  const fs::path model = dir / "m";
  ASSERT_TRUE(gpt2::saveHfDirectory(model, w, osprey::io::DType::F32, gpt2::testing::tokenizerDir()).ok());
  writeText(model / "model.safetensors", withMagic(20240327));
  const CliRun r = runOsprey({"generate", "--model", model.string(), "--prompt", "Hi", "--tokens", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, (model / "model.safetensors").string() + ": header length 12905142215 is absurd")) << r.err;
  EXPECT_TRUE(contains(r.err, "; nor is it an llm.c checkpoint (its magic number is 20240327 (0x0134d7c7), and "
                              "llm.c's is 20240326 (0x0134d7c6))"))
      << r.err;
}

// Why nothing could be created, for each errno a save meets.
TEST(HostileMessages, AnUncreatableFileNamesItsDirectoryAndWhy) {
  EXPECT_EQ(osprey::io::cannotCreateIn("/d", EROFS), "the directory /d is not writable (Read-only file system)");
  EXPECT_EQ(osprey::io::cannotCreateIn("/d", EACCES), "the directory /d is not writable (Permission denied)");
  EXPECT_EQ(osprey::io::cannotCreateIn("/d", EPERM), "the directory /d is not writable (Operation not permitted)");
  EXPECT_EQ(osprey::io::cannotCreateIn("/d", ENOENT), "the directory /d does not exist");
  EXPECT_EQ(osprey::io::cannotCreateIn("/d", ENOTDIR), "/d is not a directory (part of the path is a file)");
  EXPECT_EQ(osprey::io::cannotCreateIn("/d", ENOSPC), "no space is left for a new file in /d (No space left on device)");
  TempDir dir;
  writeText(dir / "file", "x");
  EXPECT_EQ(osprey::io::cannotCreateDirectories((dir / "file" / "a" / "b").string(), ENOTDIR),
            (dir / "file").string() + " is not a directory");
  EXPECT_EQ(osprey::io::cannotCreateDirectories((dir / "a" / "b").string(), EACCES),
            "the directory " + dir.path().string() + " is not writable (Permission denied)");
}

// train --save, init --out and any atomic save into a directory nothing can be written in name
// that directory, before any training.
TEST(HostileMessages, ASaveWhereNothingCanBeWrittenNamesTheDirectory) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  UnwritableDir ro(dir / "ro");
  if (!ro.ready()) GTEST_SKIP() << "cannot make a directory unwritable here (root on a file system without chattr)";
  const std::string named = "the directory " + ro.path().string() + " is not writable (";

  const CliRun inside = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", (ro.path() / "run").string()});
  EXPECT_EQ(inside.status, 1);
  EXPECT_TRUE(contains(inside.err, "--save " + (ro.path() / "run").string() + ": cannot create the directory: " + named))
      << inside.err;
  const CliRun itself = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", ro.path().string()});
  EXPECT_EQ(itself.status, 1);
  EXPECT_TRUE(contains(itself.err, "--save " + ro.path().string() + ": nothing could be saved: " + named)) << itself.err;
  for (const CliRun* r : {&inside, &itself}) {
    EXPECT_FALSE(contains(r->err, ".tmp-")) << r->err;
    EXPECT_FALSE(contains(r->err, "data:")) << "refused before reading the data: " << r->err;
  }

  const CliRun initInside = runOsprey({"init", "--preset", "tiny", "--out", (ro.path() / "model").string()});
  EXPECT_EQ(initInside.status, 1);
  EXPECT_TRUE(contains(initInside.err, "cannot create the directory: " + named)) << initInside.err;
  const CliRun initItself = runOsprey({"init", "--preset", "tiny", "--out", ro.path().string()});
  EXPECT_EQ(initItself.status, 1);
  EXPECT_TRUE(contains(initItself.err, named)) << initItself.err;

  // Any atomic save: the file, the temporary name, and the directory at fault.
  auto saved = osprey::io::writeFileAtomic((ro.path() / "loss.csv").string(), "step\n");
  ASSERT_FALSE(saved.ok());
  EXPECT_TRUE(contains(saved.error().message, (ro.path() / "loss.csv").string() + ": cannot create ")) << saved.error().message;
  EXPECT_TRUE(contains(saved.error().message, ": " + named)) << saved.error().message;
}

// --backend fast runs on the cuda device only; OSPREY_GPU picks the gpu backend's device. Neither
// a program built without nvcc nor a device that cannot be opened may advise OSPREY_GPU=host.
TEST(HostileMessages, FastWithOspreyGpuHostNamesWhatFastNeedsAndWhatWasGiven) {
  ScopedEnv device("OSPREY_GPU", std::string("host"));
  const CliRun here = runOsprey({"generate", "--preset", "tiny", "--prompt", "a", "--backend", "fast"});
  EXPECT_EQ(here.status, 1);
  EXPECT_TRUE(contains(here.err, "backend `fast` runs on a CUDA device")) << here.err;
  EXPECT_TRUE(contains(here.err, "OSPREY_GPU=host was given, but OSPREY_GPU picks the gpu backend's device and does "
                                 "not apply to fast"))
      << here.err;
  EXPECT_FALSE(contains(here.err, "choose OSPREY_GPU=host")) << here.err;

  // A program with the cuda entry points, on a machine whose device cannot be opened: the
  // device's own words (include/osprey/gpu/cuda/device.hpp, check.hpp) advise the gpu backend.
  static std::string deviceSays;
  const gpt2::FastRunner fast = [](gpt2::ModelJob&, const gpt2::Streams&, gpt2::FastProducts) -> osprey::Result<void> {
    return osprey::Error{deviceSays};
  };
  const gpt2::HandlerEntries entries{&gpt2::runJobOnLists, &gpt2::runJobOnGpuHost, &gpt2::runJobOnGpuHost, fast};
  auto runner = gpt2::selectRunner(gpt2::BackendChoice{"fast", "", ""}, entries);
  ASSERT_TRUE(runner.ok()) << runner.error().message;
  std::ostringstream out, err;
  const gpt2::Streams streams{out, err};
  for (const std::string& says :
       {std::string("no CUDA device: the driver reports none — run on a machine with an NVIDIA GPU or choose OSPREY_GPU=host"),
        std::string("cudaGetDeviceCount: no CUDA-capable device is detected (cudaErrorNoDevice): run on a machine with an "
                    "NVIDIA GPU and a working driver, or choose OSPREY_GPU=host")}) {
    deviceSays = says;
    for (const std::optional<std::string>& value : {std::optional<std::string>("host"), std::optional<std::string>()}) {
      ScopedEnv env("OSPREY_GPU", value);
      gpt2::ModelJob job = gpt2::LogitsJob{};
      const auto done = (*runner)(job, streams);
      ASSERT_FALSE(done.ok());
      const std::string& m = done.error().message;
      EXPECT_FALSE(contains(m, "choose OSPREY_GPU=host")) << m;
      EXPECT_TRUE(contains(m, "run on a machine with an NVIDIA GPU")) << m;
      EXPECT_TRUE(contains(m, "--backend fast needs the cuda device (an NVIDIA GPU); to run on the host instead, "
                              "choose --backend gpu --device host, or --backend lists"))
          << m;
      EXPECT_EQ(contains(m, "OSPREY_GPU=host was given"), value.has_value()) << m;
    }
  }
  // Any other failure of a fast run is its own, unchanged.
  deviceSays = "the GPU is out of memory";
  gpt2::ModelJob job = gpt2::LogitsJob{};
  EXPECT_EQ((*runner)(job, streams).error().message, "the GPU is out of memory");
}

// One token deleted from vocab.json leaves an id without a token; <|endoftext|>, whose id is now
// one past the end, is not the token to blame. The message names the missing id and its place.
TEST(HostileMessages, ATokenMissingFromTheVocabularyIsNamedByItsId) {
  TempDir dir;
  const std::string vocab = readText(gpt2::testing::tokenizerDir() / "vocab.json");
  const std::string merges = readText(gpt2::testing::tokenizerDir() / "merges.txt");
  const auto without = [&](const std::vector<std::string>& entries) {
    std::string v = vocab;
    for (const std::string& e : entries) {
      const std::size_t at = v.find(e);
      EXPECT_NE(at, std::string::npos) << e;
      v.erase(at, e.size());
    }
    return v;
  };
  struct Case {
    const char* what;
    std::vector<std::string> removed;
    std::vector<std::string> expected;
  };
  // GPT-2's vocab.json spells Ġ as \u0120; messages show a spelling's bytes as \xNN.
  const std::vector<Case> cases{
      {"\u0120the", {R"("\u0120the": 262, )"}, {R"(no token has id 262 (after "on", before "er"))", "a token is missing"}},
      {"the last ordinary token", {R"(, "\u0120gazed": 50255)"}, {R"(no token has id 50255 (after "\xc4\xa0informants"))"}},
      {"two tokens", {R"("\u0120the": 262, )", R"("er": 263, )"}, {R"(no token has id 262 (after "on"), nor does 1 more id)"}},
      {"three tokens", {R"("\u0120the": 262, )", R"("er": 263, )", R"("!": 0, )"}, {"no token has id 0 (before \"\\\"\"), nor do 2 more ids"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto t = gpt2::Tokenizer::fromContents(without(c.removed), merges, "d/vocab.json", "d/merges.txt");
    ASSERT_FALSE(t.ok());
    const std::string& m = t.error().message;
    EXPECT_EQ(m.rfind("d/vocab.json: no token has id ", 0), 0u) << m;
    for (const std::string& e : c.expected) EXPECT_TRUE(contains(m, e)) << m;
    EXPECT_TRUE(contains(m, "or one is numbered past the end: token \"<|endoftext|>\" has id 50256")) << m;
  }
  // Through the command line, in a model directory.
  const fs::path model = dir / "m";
  ASSERT_TRUE(gpt2::saveHfDirectory(model, gpt2::initialWeights(gpt2::kGpt2Tiny, gpt2::kDefaultSeed),
                                    osprey::io::DType::F32, gpt2::testing::tokenizerDir())
                  .ok());
  writeText(model / "vocab.json", without({R"("\u0120the": 262, )"}));
  const CliRun r = runOsprey({"tokenize", "--model", model.string(), "the"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, (model / "vocab.json").string() + ": no token has id 262")) << r.err;
}

// --resume with another data file, or with the same file changed, names the file the run was
// trained on (from its trainer_state.json) and the one given.
TEST(HostileMessages, ResumingOnOtherDataNamesBothFiles) {
  TempDir dir;
  const std::string trained = writeText(dir / "trained.txt", sampleTrainingText()).string();
  const std::string other = writeText(dir / "other.txt", sampleTrainingText() + "more words\n").string();
  const fs::path run = dir / "run";
  ASSERT_EQ(saveOneStep(trained, run).status, 0);
  const fs::path manifest = trainerStateOf(run);

  const CliRun r = tinyTrain(other, {"--resume", run.string(), "--steps", "2", "--save", run.string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "--data " + other + " is not the text the checkpoint was trained on: " +
                                  manifest.string() + " records " + trained + " ("))
      << r.err;
  EXPECT_TRUE(contains(r.err, "give --data " + trained + " to continue this run")) << r.err;
  EXPECT_FALSE(contains(r.err, "has changed since")) << r.err;

  writeText(trained, sampleTrainingText() + "an edit\n");
  const CliRun changed = tinyTrain(trained, {"--resume", run.string(), "--steps", "2", "--save", run.string()});
  EXPECT_EQ(changed.status, 1);
  EXPECT_TRUE(contains(changed.err, manifest.string() + " records " + trained)) << changed.err;
  EXPECT_TRUE(contains(changed.err, "(the file has changed since)")) << changed.err;
}
