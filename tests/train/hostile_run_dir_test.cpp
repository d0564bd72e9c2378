// Item: lost work. A --save directory that holds a run is refused unless --resume continues it
// or --overwrite replaces it (and `init --out` likewise); two runs cannot save to one directory
// (a flock, the holder's pid in the message); SIGTERM and SIGHUP stop a run as Ctrl-C does; and
// of several checkpoint.old-* the newest by step is used, said so, and a save leaves only one.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include "gpt2/temp_dir.hpp"
#include "gpt2/tokenizer/tokenizer.hpp"
#include "gpt2/train/checkpoint.hpp"
#include "gpt2/train/interrupt.hpp"
#include "gpt2/train/run_dir.hpp"
#include "hostile_helpers.hpp"
#include "train_helpers.hpp"

namespace fs = std::filesystem;
using gpt2::testing::TempDir;
using namespace osprey::testing::train;

TEST(HostileTrainRunDir, SavingOverAnotherRunNeedsResumeOrOverwrite) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  ASSERT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "2", "--save", run.string()}).status, 0);
  const auto before = snapshot(run);

  CliRun again = saveOneStep(data, run);
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("--save " + run.string() + ": the directory already holds a training run"),
            std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--overwrite"), std::string::npos) << again.err;
  EXPECT_EQ(snapshot(run), before);

  // Resuming some other run into it is refused too: it would replace this one.
  const fs::path other = dir / "other";
  ASSERT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", other.string()}).status, 0);
  CliRun cross = tinyTrain(data, {"--resume", other.string(), "--steps", "1", "--save", run.string()});
  EXPECT_EQ(cross.status, 1);
  EXPECT_NE(cross.err.find("this run resumes from " + other.string()), std::string::npos) << cross.err;
  EXPECT_EQ(snapshot(run), before);

  // Continuing the run itself is what --resume is for (also named by its checkpoint/).
  CliRun resumed = tinyTrain(data, {"--resume", gpt2::train::checkpointDir(run).string(), "--steps", "1", "--save",
                                    run.string()});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(gpt2::train::loadTrainingCheckpoint(run)->state.step, 3);

  // --overwrite replaces it: a fresh run, its own loss history.
  CliRun replaced = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", run.string(), "--overwrite"});
  ASSERT_EQ(replaced.status, 0) << replaced.err;
  EXPECT_EQ(gpt2::train::loadTrainingCheckpoint(run)->state.step, 1);
}

TEST(HostileTrainRunDir, ALossHistoryWithoutACheckpointNeedsOverwrite) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  fs::create_directories(run);
  // What a run that failed before its first save leaves: steps in loss.csv, no checkpoint.
  writeText(run / "loss.csv", "step,train_loss,val_loss,tokens_per_s\n1,10.9,,100.0\n2,10.8,,100.0\n");
  CliRun r = saveOneStep(data, run);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already holds a training run's loss history (" + (run / "loss.csv").string() +
                       ") and no checkpoint; give --overwrite"),
            std::string::npos) << r.err;
  EXPECT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", run.string(), "--overwrite"}).status, 0);
  // A loss.csv holding only its header records nothing: no --overwrite needed.
  const fs::path empty = dir / "empty";
  fs::create_directories(empty);
  writeText(empty / "loss.csv", "step,train_loss,val_loss,tokens_per_s\n");
  EXPECT_EQ(tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", empty.string()}).status, 0);
}

TEST(HostileTrainRunDir, InitRefusesToWriteOverAModel) {
  TempDir dir;
  const std::string out = (dir / "model").string();
  ASSERT_EQ(runOsprey({"init", "--preset", "tiny", "--out", out}).status, 0);
  const auto before = snapshot(out);
  CliRun again = runOsprey({"init", "--preset", "tiny", "--seed", "9", "--out", out});
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("--out " + out + ": already holds a model"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--overwrite"), std::string::npos) << again.err;
  EXPECT_EQ(snapshot(out), before);
  CliRun replaced = runOsprey({"init", "--preset", "tiny", "--seed", "9", "--out", out, "--overwrite"});
  EXPECT_EQ(replaced.status, 0) << replaced.err;
  EXPECT_NE(snapshot(out), before);

  // A training checkpoint directory, or a run's directory, is a model too.
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  ASSERT_EQ(saveOneStep(data, run).status, 0);
  EXPECT_EQ(runOsprey({"init", "--preset", "tiny", "--out", gpt2::train::checkpointDir(run).string()}).status, 1);
  EXPECT_EQ(runOsprey({"init", "--preset", "tiny", "--out", run.string()}).status, 1);
}

TEST(HostileTrainRunDir, ASecondRunOnTheSameDirectoryFailsAtOnceNamingThePid) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  {
    // Another run holds the directory (a lock taken as a run takes it; flock excludes a second
    // open of the file even in this same process).
    auto held = gpt2::train::lockRunDirectory(run);
    ASSERT_TRUE(held.ok()) << held.error().message;
    auto second = gpt2::train::lockRunDirectory(run);
    ASSERT_FALSE(second.ok());
    const auto start = std::chrono::steady_clock::now();
    CliRun r = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", run.string(), "--overwrite"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "it waited";
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("the directory is in use by another training run (pid " + std::to_string(::getpid()) + ","),
              std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("gpt2 (tiny)"), std::string::npos) << "it ran: " << r.out;
    EXPECT_FALSE(fs::exists(gpt2::train::checkpointDir(run)));
  }
  // Released with its holder: the directory is free again.
  CliRun r = saveOneStep(data, run);
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(HostileTrainRunDir, TwoConcurrentRunsOnOneDirectoryCannotBothSave) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  // A long run in a thread; once it has a step in loss.csv it holds the lock.
  std::atomic<bool> started{false};
  CliRun first;
  std::thread worker([&] {
    first = tinyTrain(data, {"--preset", "tiny", "--steps", "100000", "--save", run.string(), "--time-limit", "20"});
  });
  for (int i = 0; i < 1000 && !started; ++i) {
    if (fs::exists(run / "loss.csv") && readText(run / "loss.csv").find("\n1,") != std::string::npos) started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CliRun second = tinyTrain(data, {"--resume", run.string(), "--steps", "1", "--save", run.string()});
  gpt2::train::requestInterrupt();  // end the first run (as Ctrl-C would)
  worker.join();
  ASSERT_TRUE(started);
  EXPECT_EQ(second.status, 1);
  EXPECT_NE(second.err.find("in use by another training run"), std::string::npos) << second.err;
  EXPECT_EQ(first.status, 0) << first.err;
}

namespace {

// Runs `train` and sends `sig` to this process once its first step is in loss.csv.
CliRun runAndSignal(const std::string& data, const fs::path& save, int sig) {
  std::atomic<bool> done{false};
  std::thread sender([&] {
    while (!done.load()) {
      if (fs::exists(save / "loss.csv") && readText(save / "loss.csv").find("\n1,") != std::string::npos) {
        std::raise(sig);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  CliRun r = tinyTrain(data, {"--preset", "tiny", "--steps", "100000", "--save", save.string()});
  done = true;
  sender.join();
  return r;
}

}  // namespace

TEST(HostileTrainRunDir, SigtermAndSighupFinishTheStepAndSaveAsCtrlCDoes) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  for (auto [sig, name] : {std::pair{SIGTERM, "SIGTERM"}, std::pair{SIGHUP, "SIGHUP"}}) {
    const fs::path save = dir / name;
    CliRun r = runAndSignal(data, save, sig);
    ASSERT_EQ(r.status, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find(std::string("interrupted: stopped cleanly after step")), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string("(") + name + "; checkpoint saved)"), std::string::npos) << r.out;
    auto c = gpt2::train::loadTrainingCheckpoint(save);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_GE(c->state.step, 1);
    EXPECT_LT(c->state.step, 100000);
  }
  // Afterwards the default actions are back (the guard restored them).
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(HostileTrainRunDir, ASignalTheProcessIgnoresStaysIgnored) {
  // nohup leaves SIGHUP ignored: a hangup must not stop the run then.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGHUP, &ignore, &previous);
  {
    gpt2::train::InterruptGuard guard;
    struct sigaction now {};
    sigaction(SIGHUP, nullptr, &now);
    EXPECT_EQ(now.sa_handler, SIG_IGN);
    std::raise(SIGHUP);
    EXPECT_FALSE(gpt2::train::interruptRequested());
    sigaction(SIGTERM, nullptr, &now);
    EXPECT_NE(now.sa_handler, SIG_DFL);  // SIGTERM is caught
  }
  sigaction(SIGHUP, &previous, nullptr);
}

namespace {

// A checkpoint of `step` at dir/name, as an interrupted save leaves it.
void leaveOldCheckpoint(const fs::path& dir, const std::string& name, gpt2::Index step) {
  gpt2::train::HostCheckpoint c;
  c.weights = smallWeights(kSmall, static_cast<std::uint64_t>(step));
  c.m = smallWeights(kSmall, 1);
  c.v = smallWeights(kSmall, 2);
  for (auto& t : c.v.tensors)
    for (auto& x : t.values) x = x * x;
  c.state.step = step;
  c.state.batch = 2;
  c.state.seq = 8;
  c.state.label = "small";
  const fs::path scratch = dir / ("scratch-" + name);
  ASSERT_TRUE(gpt2::train::saveTrainingCheckpoint(scratch, c, *gpt2::findTokenizerDir()).ok());
  fs::rename(gpt2::train::checkpointDir(scratch), dir / name);
  fs::remove_all(scratch);
}

}  // namespace

TEST(HostileTrainRunDir, OfSeveralOldCheckpointsTheNewestByStepIsUsedAndOneIsKept) {
  TempDir dir;
  const fs::path run = dir / "run";
  fs::create_directories(run);
  leaveOldCheckpoint(run, "checkpoint.old-100", 3);
  leaveOldCheckpoint(run, "checkpoint.old-20", 5);
  leaveOldCheckpoint(run, "checkpoint.old-7", 5);  // same step: the later name in byte order wins
  auto c = gpt2::train::loadTrainingCheckpoint(run);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->state.step, 5);
  EXPECT_EQ(c->source, run / "checkpoint.old-7");
  EXPECT_NE(c->note.find("using " + (run / "checkpoint.old-7").string() + " (step 5), the newest by step of 3"),
            std::string::npos) << c->note;

  // A save that dies before its swap must not have deleted the only good checkpoint.
  auto next = *c;
  next.state.step = 6;
  gpt2::train::setFailBeforeCheckpointSwapForTesting(true);
  auto failed = gpt2::train::saveTrainingCheckpoint(run, next, *gpt2::findTokenizerDir());
  gpt2::train::setFailBeforeCheckpointSwapForTesting(false);
  ASSERT_FALSE(failed.ok());
  auto kept = gpt2::train::loadTrainingCheckpoint(run);
  ASSERT_TRUE(kept.ok()) << kept.error().message;
  EXPECT_EQ(kept->state.step, 5);
  EXPECT_EQ(kept->source, gpt2::train::checkpointDir(run)) << "the newest old-* was moved back into place";

  // A save that succeeds leaves one checkpoint and no old-*.
  ASSERT_TRUE(gpt2::train::saveTrainingCheckpoint(run, next, *gpt2::findTokenizerDir()).ok());
  for (const auto& entry : fs::directory_iterator(run))
    EXPECT_EQ(entry.path().filename().string().rfind("checkpoint.", 0), std::string::npos) << entry.path();
  EXPECT_EQ(gpt2::train::loadTrainingCheckpoint(run)->state.step, 6);
}
