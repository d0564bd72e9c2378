// The loss curve beside loss.csv (gpt2/train/loss_plot.hpp): `train --save DIR` writes DIR/loss.gp
// and, with gnuplot installed, DIR/loss.png (a PNG); the program draws from its own directory, so
// a copied run directory draws too; a missing or failing gnuplot is a note saying how to draw it
// by hand, never a failed run; --no-plot writes neither file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gpt2/temp_dir.hpp"
#include "gpt2/train/loss_plot.hpp"
#include "hostile_helpers.hpp"

namespace fs = std::filesystem;
using gpt2::testing::ScopedEnv;
using gpt2::testing::TempDir;
using namespace osprey::testing::train;

namespace {

// Whether a program of this name is on the PATH.
bool onPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool isPng(const fs::path& file) { return readText(file).substr(0, 8) == "\x89PNG\r\n\x1a\n"; }

void writeHistory(const fs::path& dir, const std::string& rows) {
  fs::create_directories(dir);
  writeText(dir / "loss.csv", "step,train_loss,val_loss,tokens_per_s\n" + rows);
}

const std::string kRows = "1,10.9,,100\n2,9.5,9.8,100\n3,8.25,,100\n4,7.5,7.9,100\n";

}  // namespace

TEST(LossCurve, TheProgramNamesNoPathAndQuotesItsTitle) {
  const std::string program = gpt2::train::lossCurveProgram("it's\ngpt2 (tiny)");
  EXPECT_NE(program.find("set title 'it''s gpt2 (tiny)' noenhanced"), std::string::npos) << program;
  EXPECT_NE(program.find("dir.'loss.csv'"), std::string::npos) << program;
  EXPECT_NE(program.find("set output dir.'loss.png'"), std::string::npos) << program;
  EXPECT_EQ(program.find("/tmp"), std::string::npos) << program;
}

TEST(LossCurve, DrawnFromItsOwnDirectoryWhereverItIs) {
  if (!onPath("gnuplot")) GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)";
  TempDir dir;
  const fs::path run = dir / "run it's";
  writeHistory(run, kRows);
  ASSERT_TRUE(gpt2::train::writeLossCurveProgram(run, "a title").ok());
  const auto drawn = gpt2::train::drawLossCurve(run);
  EXPECT_TRUE(drawn.drawn) << drawn.note;
  EXPECT_EQ(drawn.note, "loss curve: " + (run / "loss.png").string() + " (gnuplot " + (run / "loss.gp").string() +
                            " redraws it)");
  EXPECT_TRUE(isPng(run / "loss.png"));

  // Copied elsewhere (the program holds no path), and drawn from another working directory.
  const fs::path copy = dir / "copy";
  fs::create_directories(copy);
  fs::copy_file(run / "loss.csv", copy / "loss.csv");
  fs::copy_file(run / "loss.gp", copy / "loss.gp");
  const auto again = gpt2::train::drawLossCurve(copy);
  EXPECT_TRUE(again.drawn) << again.note;
  EXPECT_TRUE(isPng(copy / "loss.png"));

  // A history without a single validation loss still draws (the training line alone).
  writeHistory(run, "1,10.9,,100\n2,9.5,,100\n");
  EXPECT_TRUE(gpt2::train::drawLossCurve(run).drawn);
}

TEST(LossCurve, WithoutGnuplotOrWithAFailingOneANoteSaysHowToDrawIt) {
  TempDir dir;
  const fs::path run = dir / "run";
  writeHistory(run, kRows);
  ASSERT_TRUE(gpt2::train::writeLossCurveProgram(run, "t").ok());
  writeText(run / "loss.png", "an old curve");

  const auto missing = gpt2::train::drawLossCurve(run, "osprey-no-such-gnuplot");
  EXPECT_FALSE(missing.drawn);
  EXPECT_EQ(missing.note, "loss curve not drawn: osprey-no-such-gnuplot is not installed (Debian: apt-get install "
                          "gnuplot-nox); then `gnuplot " + (run / "loss.gp").string() + "` draws " +
                              (run / "loss.png").string());
  EXPECT_FALSE(fs::exists(run / "loss.png")) << "a stale curve must not pass for this run's";

  const auto failing = gpt2::train::drawLossCurve(run, "false");
  EXPECT_FALSE(failing.drawn);
  EXPECT_EQ(failing.note.rfind("loss curve not drawn: false failed (exit status 1)", 0), 0u) << failing.note;

  // Nothing recorded: nothing drawn, nothing said.
  writeHistory(run, "");
  const auto empty = gpt2::train::drawLossCurve(run);
  EXPECT_FALSE(empty.drawn);
  EXPECT_EQ(empty.note, "");
}

TEST(LossCurve, TrainDrawsItBesideLossCsvUnlessToldNot) {
  TempDir dir;
  const std::string data = writeText(dir / "text.txt", sampleTrainingText()).string();
  const fs::path run = dir / "run";
  CliRun r = tinyTrain(data, {"--preset", "tiny", "--steps", "2", "--val-every", "1", "--save", run.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(run / "loss.gp"));
  if (onPath("gnuplot")) {
    EXPECT_NE(r.out.find("\nloss curve: " + (run / "loss.png").string()), std::string::npos) << r.out;
    EXPECT_TRUE(isPng(run / "loss.png"));
  } else {
    EXPECT_NE(r.out.find("loss curve not drawn: gnuplot is not installed"), std::string::npos) << r.out;
  }

  {
    const TempDir empty;  // a PATH without gnuplot: the run succeeds and says how to draw the curve
    const ScopedEnv path("PATH", empty.path().string());
    const fs::path bare = dir / "bare";
    CliRun b = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--save", bare.string()});
    ASSERT_EQ(b.status, 0) << b.err;
    EXPECT_NE(b.out.find("loss curve not drawn: gnuplot is not installed (Debian: apt-get install gnuplot-nox); "
                         "then `gnuplot " + (bare / "loss.gp").string() + "`"),
              std::string::npos) << b.out;
    EXPECT_FALSE(fs::exists(bare / "loss.png"));
  }

  const fs::path quiet = dir / "quiet";
  CliRun q = tinyTrain(data, {"--preset", "tiny", "--steps", "1", "--no-plot", "--save", quiet.string()});
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_EQ(q.out.find("loss curve"), std::string::npos) << q.out;
  EXPECT_TRUE(fs::exists(quiet / "loss.csv"));
  EXPECT_FALSE(fs::exists(quiet / "loss.gp"));
  EXPECT_FALSE(fs::exists(quiet / "loss.png"));
}
