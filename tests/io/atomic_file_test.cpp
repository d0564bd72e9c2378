// Atomic saves: a save interrupted before its rename leaves the previous file byte-identical and
// no temporary file behind; a completed save replaces it whole.
#include "osprey/io/atomic_file.hpp"

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/io_test_files.hpp"
#include "osprey/io/safetensors_writer.hpp"
#include "osprey/io/tensor_file.hpp"

namespace osprey::io {
namespace {

using testing::ScratchDir;

// Only the target itself may be in the directory: no `.tmp-<pid>` left over.
std::vector<std::string> entries(const ScratchDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) names.push_back(entry.path().filename());
  return names;
}

// Turns the failure injection on for one scope, whichever switch the test uses.
class FailBeforeRename {
 public:
  explicit FailBeforeRename(bool viaEnvironment) : m_viaEnvironment(viaEnvironment) {
    if (m_viaEnvironment) {
      ::setenv("OSPREY_FAIL_BEFORE_RENAME", "1", 1);
    } else {
      setFailBeforeRenameForTesting(true);
    }
  }
  ~FailBeforeRename() {
    ::unsetenv("OSPREY_FAIL_BEFORE_RENAME");
    setFailBeforeRenameForTesting(false);
  }

 private:
  bool m_viaEnvironment;
};

TEST(AtomicFile, WritesAndReplaces) {
  ScratchDir dir;
  const std::string path = dir.file("state.bin");
  ASSERT_TRUE(writeFileAtomic(path, "first").ok());
  EXPECT_EQ(testing::readBytes(path), "first");
  ASSERT_TRUE(writeFileAtomic(path, std::string(3'000'000, 'x')).ok());  // larger than the buffer
  EXPECT_EQ(testing::readBytes(path), std::string(3'000'000, 'x'));
  EXPECT_EQ(entries(dir), std::vector<std::string>{"state.bin"});
}

TEST(AtomicFile, StreamingWritesInPieces) {
  ScratchDir dir;
  const std::string path = dir.file("stream.bin");
  auto file = AtomicFile::create(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->temporaryPath(), path + ".tmp-" + std::to_string(::getpid()));
  std::string expected;
  for (int i = 0; i < 1000; ++i) {
    const std::string piece = std::to_string(i) + ",";
    ASSERT_TRUE(file->write(piece).ok());
    expected += piece;
  }
  ASSERT_TRUE(file->write(std::string(2'000'000, 'y')).ok());  // bypasses the buffer
  expected += std::string(2'000'000, 'y');
  ASSERT_TRUE(file->write("end").ok());
  expected += "end";
  EXPECT_FALSE(std::filesystem::exists(path));  // nothing visible until commit
  ASSERT_TRUE(file->commit().ok());
  EXPECT_EQ(testing::readBytes(path), expected);
  EXPECT_FALSE(file->commit().ok());  // once only
}

TEST(AtomicFile, AbandonedSaveLeavesThePreviousFile) {
  ScratchDir dir;
  const std::string path = dir.file("keep.bin");
  ASSERT_TRUE(writeFileAtomic(path, "previous").ok());
  {
    auto file = AtomicFile::create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->write("half-written").ok());
  }  // destroyed without commit
  EXPECT_EQ(testing::readBytes(path), "previous");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"keep.bin"});
}

class InjectedFailure : public ::testing::TestWithParam<bool> {};

TEST_P(InjectedFailure, PreviousFileIsByteIdentical) {
  ScratchDir dir;
  const std::string path = dir.file("checkpoint.bin");
  std::string previous;
  for (int i = 0; i < 256; ++i) previous.push_back(static_cast<char>(i));
  ASSERT_TRUE(writeFileAtomic(path, previous).ok());
  {
    FailBeforeRename inject(GetParam());
    auto failed = writeFileAtomic(path, "the new contents");
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().message.rfind(path + ": save stopped before the rename", 0), 0u)
        << failed.error().message;
  }
  EXPECT_EQ(testing::readBytes(path), previous);
  EXPECT_EQ(entries(dir), std::vector<std::string>{"checkpoint.bin"});
  ASSERT_TRUE(writeFileAtomic(path, "after").ok());  // and the next save works
  EXPECT_EQ(testing::readBytes(path), "after");
}

TEST_P(InjectedFailure, InterruptedSafetensorsSaveKeepsThePreviousCheckpoint) {
  ScratchDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<Scalar> before{1.0, 2.0, 3.0};
  const std::vector<Scalar> after{7.0, 8.0, 9.0};
  ASSERT_TRUE(writeSafetensors(path, {{"w", {3}, before}}, DType::F32).ok());
  const std::string bytesBefore = testing::readBytes(path);
  {
    FailBeforeRename inject(GetParam());
    EXPECT_FALSE(writeSafetensors(path, {{"w", {3}, after}}, DType::F32).ok());
  }
  EXPECT_EQ(testing::readBytes(path), bytesBefore);
  EXPECT_EQ(readTensor(path, "w")->values, before);
  EXPECT_EQ(entries(dir), std::vector<std::string>{"model.safetensors"});
}

INSTANTIATE_TEST_SUITE_P(BySwitch, InjectedFailure, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Environment") : std::string("Function");
                         });

TEST(AtomicFile, UnwritableDestinationIsAnError) {
  ScratchDir dir;
  auto noDirectory = writeFileAtomic(dir.file("missing/sub/x.bin"), "x");
  ASSERT_FALSE(noDirectory.ok());
  EXPECT_NE(noDirectory.error().message.find("cannot create"), std::string::npos);
  EXPECT_NE(noDirectory.error().message.find("missing/sub/x.bin.tmp-"), std::string::npos);

  std::filesystem::create_directories(dir.path() / "occupied");  // a directory where the file should go
  auto overDirectory = writeFileAtomic(dir.file("occupied"), "x");
  ASSERT_FALSE(overDirectory.ok());
  EXPECT_NE(overDirectory.error().message.find("cannot rename"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "occupied"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("occupied") + ".tmp-" + std::to_string(::getpid())));

  EXPECT_FALSE(writeFileAtomic("", "x").ok());
}

}  // namespace
}  // namespace osprey::io
