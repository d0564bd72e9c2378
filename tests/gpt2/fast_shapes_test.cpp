// The fast handler's shape decisions (gpt2/fast/shape_support.hpp), asked on the host for every
// GPT-2 size: which path each family of kernels takes, and that a shape a kernel cannot take is an
// error naming the kernel and the shape. The handler asks the same functions before it launches.
#include <gtest/gtest.h>

#include <string>

#include "gpt2/fast/shape_support.hpp"
#include "gpt2/model/config.hpp"

namespace gpt2::fast_shapes {
namespace {

TEST(FastShapes, EveryGpt2SizeTakesEveryFusedKernel) {
  struct Expected {
    Config config;
    bool geluColumnSums;  // 4C within geluBackwardSummed's 4096 columns
  };
  for (const Expected& e : {Expected{kGpt2_124M, true}, Expected{kGpt2_350M, true}, Expected{kGpt2_774M, false},
                            Expected{kGpt2_1558M, false}}) {
    SCOPED_TRACE(sizeLabel(e.config));
    for (Index B : {1, 4, 16, 64}) {  // the training shapes up to B64, and decoding's B1
      const Paths p = pathsFor(e.config, B);
      EXPECT_TRUE(p.flashAttention) << "B " << B;
      EXPECT_EQ(p.layernormBackwardSets, 3);
      EXPECT_EQ(p.geluColumnSums, e.geluColumnSums);
      EXPECT_FALSE(p.decoding.has_value()) << *p.decoding;
    }
    // Batch rows past the flash grid's 65535 (batch, head) blocks take the per-head path.
    EXPECT_FALSE(pathsFor(e.config, kFlashMaxGridHeads / e.config.NH + 1).flashAttention);
  }
}

TEST(FastShapes, OtherHeadSizesTakeThePerHeadPath) {
  EXPECT_FALSE(pathsFor(kGpt2Tiny, 4).flashAttention);  // heads of 32
  EXPECT_FALSE(pathsFor(kGpt2Tiny, 4).decoding.has_value());
  EXPECT_TRUE(flashFits(2, 1600, 25));
  EXPECT_FALSE(flashFits(2, 1600, 20));  // heads of 80
  EXPECT_FALSE(flashFits(2, 96, 2));     // heads of 48
  EXPECT_FALSE(flashFits(2, 64, 0));
  EXPECT_FALSE(pathsFor(Config{1024, 50257, 1, 16, 1280}, 4).flashAttention);
}

TEST(FastShapes, ShapesAKernelCannotTakeAreErrorsNamingIt) {
  // Heads of 320 channels: decoding's attention kernel holds up to 256.
  const auto wide = decodingProblem(Config{1024, 50257, 2, 5, 1600});
  ASSERT_TRUE(wide.has_value());
  EXPECT_NE(wide->find("attendOneRow"), std::string::npos) << *wide;
  EXPECT_NE(wide->find("heads of 320 channels"), std::string::npos) << *wide;
  EXPECT_NE(wide->find("up to 256"), std::string::npos) << *wide;
  EXPECT_FALSE(decodeAttentionProblem(1024, 4).has_value());  // 256: the widest it takes
  // A row wider than decoding's normalised row in shared memory (heads of 64 throughout).
  const auto row = decodingProblem(Config{1024, 50257, 1, 200, 12800});
  ASSERT_TRUE(row.has_value());
  EXPECT_NE(row->find("linearRow"), std::string::npos) << *row;
  EXPECT_NE(row->find("12800"), std::string::npos) << *row;
  EXPECT_FALSE(normalisedRowProblem(kMaxNormalisedRow).has_value());
  // A config that is no GPT-2 at all is said so first.
  const auto broken = decodingProblem(Config{1024, 50257, 1, 7, 1600});
  ASSERT_TRUE(broken.has_value());
  EXPECT_NE(broken->find("n_head"), std::string::npos) << *broken;
}

TEST(FastShapes, LayerNormBackwardSetsFollowSharedMemory) {
  EXPECT_EQ(layernormBackwardSets(1600, kH200SharedPerBlock), 3);  // 150 KiB of 227
  EXPECT_EQ(layernormBackwardSets(2421, kH200SharedPerBlock), 3);
  EXPECT_EQ(layernormBackwardSets(2422, kH200SharedPerBlock), 2);
  EXPECT_EQ(layernormBackwardSets(3632, kH200SharedPerBlock), 2);
  EXPECT_EQ(layernormBackwardSets(3633, kH200SharedPerBlock), 0);  // the reference definition
  EXPECT_EQ(layernormBackwardSets(1600, 48 * 1024), 0);             // a device without the opt-in
  EXPECT_EQ(layernormBackwardShared(768, 3), std::size_t{8 * 3 * 4 * 768});
}

}  // namespace
}  // namespace gpt2::fast_shapes
