// `osprey-gpt2 export --format llmc`: a float32 model written as llm.c's version-3 checkpoint
// and read back gives the same weights bit for bit; the header is llm.c's (magic 20240326,
// version 3, Vp = 50304); exporting the export again gives the same bytes; wider weights are
// rounded and said so; and the command's mistakes are errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gpt2/checkpoint/load.hpp"
#include "gpt2/checkpoint/save_llmc.hpp"
#include "gpt2/model/init.hpp"
#include "gpt2/temp_dir.hpp"
#include "handlers.hpp"
#include "train/cli_run.hpp"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;
using osprey::testing::train::runOsprey;
using testing::TempDir;

std::string bytesOf(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::int32_t headerInt(const std::string& bytes, int k) {
  std::int32_t v = 0;
  std::memcpy(&v, bytes.data() + 4 * k, 4);  // little-endian on every machine the suite runs on
  return v;
}

void expectSameWeights(const HostWeights& a, const HostWeights& b) {
  ASSERT_EQ(a.config, b.config);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  const auto specs = parameterSpecs(a.config);
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    ASSERT_TRUE(osprey::testing::sameBits(a.tensors[i].values, b.tensors[i].values))
        << specs[i].name << ": first difference at " << osprey::testing::firstBitDifference(a.tensors[i].values,
                                                                                           b.tensors[i].values);
}

TEST(ExportLlmc, AFloat32ModelReadsBackBitForBit) {
  TempDir dir;
  const fs::path model = dir / "tiny", exported = dir / "tiny.bin", again = dir / "again.bin";
  ASSERT_EQ(runOsprey({"init", "--preset", "tiny", "--dtype", "f32", "--out", model.string()}).status, 0);
  auto r = runOsprey({"export", "--format", "llmc", "--model", model.string(), "--out", exported.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("llm.c checkpoint (version 3, F32)"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("rounded"), std::string::npos) << r.err;  // float32 weights are exact

  const std::string bytes = bytesOf(exported);
  ASSERT_GE(bytes.size(), 1024u);
  const Config c = kGpt2Tiny;
  EXPECT_EQ(headerInt(bytes, 0), 20240326);
  EXPECT_EQ(headerInt(bytes, 1), 3);
  EXPECT_EQ(headerInt(bytes, 2), c.maxT);
  EXPECT_EQ(headerInt(bytes, 3), c.V);
  EXPECT_EQ(headerInt(bytes, 4), c.L);
  EXPECT_EQ(headerInt(bytes, 5), c.NH);
  EXPECT_EQ(headerInt(bytes, 6), c.C);
  EXPECT_EQ(headerInt(bytes, 7), 50304);
  // Header plus float32 parameters, wte padded to 50304 rows: nothing else in the file.
  const std::uint64_t params = static_cast<std::uint64_t>(parameterCount(c)) + (50304 - c.V) * c.C;
  EXPECT_EQ(bytes.size(), 1024 + 4 * params);

  auto original = loadCheckpoint(model);
  auto loaded = loadCheckpoint(exported);
  ASSERT_TRUE(original.ok()) << original.error().message;
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  expectSameWeights(original->weights, loaded->weights);

  // And back again: the llm.c file exported once more is the same bytes.
  auto twice = runOsprey({"export", "--format", "llmc", "--model", exported.string(), "--out", again.string()});
  ASSERT_EQ(twice.status, 0) << twice.err;
  EXPECT_EQ(bytesOf(again), bytes);
}

TEST(ExportLlmc, WiderWeightsAreRoundedAndSaidSo) {
  TempDir dir;
  const HostWeights weights = initialWeights(kGpt2Tiny, kDefaultSeed);  // float64 values
  auto rounded = saveLlmcCheckpoint(dir / "f.bin", weights);
  ASSERT_TRUE(rounded.ok()) << rounded.error().message;
  EXPECT_GT(*rounded, 0u);
  auto r = runOsprey({"export", "--format", "llmc", "--preset", "tiny", "--out", (dir / "p.bin").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("were rounded to the nearest"), std::string::npos) << r.err;
  // Rounded to float32, then read back: each weight is its float32 rounding.
  auto loaded = loadCheckpoint(dir / "f.bin");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  for (std::size_t i = 0; i < weights.tensors.size(); ++i)
    for (std::size_t k = 0; k < weights.tensors[i].values.size(); k += 997)
      ASSERT_EQ(loaded->weights.tensors[i].values[k],
                static_cast<double>(static_cast<float>(weights.tensors[i].values[k])));
}

TEST(ExportLlmc, MistakesAreErrors) {
  TempDir dir;
  const std::string out = (dir / "m.bin").string();
  auto format = runOsprey({"export", "--format", "onnx", "--preset", "tiny", "--out", out});
  EXPECT_EQ(format.status, 1);
  EXPECT_NE(format.err.find("unknown --format `onnx`: choose llmc"), std::string::npos) << format.err;
  EXPECT_FALSE(fs::exists(out));
  ASSERT_EQ(runOsprey({"export", "--format", "llmc", "--preset", "tiny", "--out", out}).status, 0);
  auto exists = runOsprey({"export", "--format", "llmc", "--preset", "tiny", "--out", out});
  EXPECT_EQ(exists.status, 1);
  EXPECT_NE(exists.err.find("give --overwrite"), std::string::npos) << exists.err;
  EXPECT_EQ(runOsprey({"export", "--format", "llmc", "--preset", "tiny", "--out", out, "--overwrite"}).status, 0);
  auto directory = runOsprey({"export", "--format", "llmc", "--preset", "tiny", "--out", dir.path().string()});
  EXPECT_EQ(directory.status, 1);
  EXPECT_NE(directory.err.find("is a directory"), std::string::npos) << directory.err;
  EXPECT_NE(runOsprey({"export", "--preset", "tiny", "--out", out}).status, 0);  // --format is required
}

}  // namespace
}  // namespace gpt2
