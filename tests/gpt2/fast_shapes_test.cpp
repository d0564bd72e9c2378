// The fast handler's shape decisions (gpt2/fast/shape_support.hpp), asked on the host for every
// GPT-2 size: which path each family of kernels takes, and that a shape a kernel cannot take is an
// error naming the kernel and the shape. The handler asks the same functions before it launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "gpt2/fast/shape_support.hpp"
#include "gpt2/model/config.hpp"

namespace gpt2::fast_shapes {
namespace {

TEST(FastShapes, EveryGpt2SizeTakesEveryFusedKernel) {
  struct Expected {
    Config config;
    int layernormHeldGroups;  // C / 4 groups of four in 32 lanes
  };
  for (const Expected& e : {Expected{kGpt2_124M, 6}, Expected{kGpt2_350M, 8}, Expected{kGpt2_774M, 10},
                            Expected{kGpt2_1558M, 13}}) {
    SCOPED_TRACE(sizeLabel(e.config));
    for (Index B : {1, 4, 16, 64}) {  // the training shapes up to B64, and decoding's B1
      const Paths p = pathsFor(e.config, B);
      EXPECT_TRUE(p.flashAttention) << "B " << B;
      EXPECT_EQ(p.layernormBackwardSets, 3);
      EXPECT_EQ(p.layernormHeldGroups, e.layernormHeldGroups);
      EXPECT_TRUE(p.geluColumnSums);  // 4C within geluBackwardSummed's 7,168 columns
      EXPECT_FALSE(p.decoding.has_value()) << *p.decoding;
    }
    // Batch rows past the flash grid's 65535 (batch, head) blocks take the per-head path.
    EXPECT_FALSE(pathsFor(e.config, kFlashMaxGridHeads / e.config.NH + 1).flashAttention);
  }
}

// The LayerNorm's rows held in registers: the fewest groups a lane that hold the row, at each
// count's edge; rows that are not whole groups of four, or wider than 13 groups a lane, are walked.
TEST(FastShapes, LayerNormRowsAreHeldInTheFewestGroups) {
  for (const auto& [C, groups] : {std::pair<Index, int>{4, 6}, {768, 6}, {772, 8}, {1024, 8}, {1028, 10},
                                  {1280, 10}, {1284, 13}, {1664, 13}, {1668, 0}, {1, 0}, {1602, 0}, {2048, 0}})
    EXPECT_EQ(layernormHeldGroups(C), groups) << "C " << C;
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

// Flash attention's saved state (its att, fast_shapes::flashSaved) at every GPT-2 size, batch and
// length the model runs: the output first, on the allocation's 256 bytes, and so every row and
// head of it, which the forward writes and the backward's row dots read 8 bytes at a time and the
// projection after it reads as a product's operand. With the log-sum-exps first, the output began
// B·NH·T floats in, an odd count at 1558M's 25 heads over an odd length at B1 (a 5-token prompt:
// 125 floats, 500 bytes), where the forward's stores faulted on the device as misaligned.
TEST(FastShapes, FlashSavedOutputIsAlignedAtEverySize) {
  for (const Config& c : {kGpt2_124M, kGpt2_350M, kGpt2_774M, kGpt2_1558M}) {
    SCOPED_TRACE(sizeLabel(c));
    for (Index B : {1, 2, 3, 4, 16}) {
      ASSERT_TRUE(flashFits(B, c.C, c.NH));
      for (Index T = 1; T <= c.maxT; ++T) {
        const FlashSaved s = flashSaved(B, T, c.C, c.NH);
        const auto problem = flashSavedProblem(s);
        ASSERT_FALSE(problem.has_value()) << "B " << B << " T " << T << ": " << *problem;
        const Index outputs = B * T * c.C, stats = B * c.NH * T;
        ASSERT_EQ(s.size, outputs + stats) << "B " << B << " T " << T;  // att's length: no padding
        ASSERT_TRUE(s.out + outputs <= s.lse || s.lse + stats <= s.out) << "B " << B << " T " << T;
        ASSERT_LE(std::max(s.out + outputs, s.lse + stats), s.size) << "B " << B << " T " << T;
        // The first and the last head of the last row, as the kernels address them.
        for (Index at : {s.out, s.out + (B * T - 1) * c.C + (c.NH - 1) * kFlashHead})
          ASSERT_EQ(static_cast<std::size_t>(at) * sizeof(float) % kFlashSavedAlignment, 0u)
              << "B " << B << " T " << T << " at " << at;
      }
    }
  }
  // The old layout, the output behind the log-sum-exps, is refused with the kernels named.
  const Index B = 1, T = 5, C = kGpt2_1558M.C, NH = kGpt2_1558M.NH;
  const auto old = flashSavedProblem(FlashSaved{B * NH * T, 0, B * NH * T + B * T * C});
  ASSERT_TRUE(old.has_value());
  EXPECT_NE(old->find("flashForward"), std::string::npos) << *old;
  EXPECT_NE(old->find("125 floats (500 bytes)"), std::string::npos) << *old;
  EXPECT_FALSE(flashSavedProblem(FlashSaved{B * NH * 64 * 4, 0, 0}).has_value());  // B4 T64: 6400 floats, 25600 bytes
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
