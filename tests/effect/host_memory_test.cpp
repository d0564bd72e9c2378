// The host device's block cache: a released block comes back for any request of its size class
// (size_class.hpp), so a buffer that grows a row at a time (a decoding key/value cache) reuses
// the block it outgrew instead of asking the system for a new one.
#include <gtest/gtest.h>

#include "osprey/gpu/host/device.hpp"
#include "osprey/gpu/size_class.hpp"

namespace {

using osprey::HostDevice;
using osprey::sizeClass;

TEST(HostMemory, AGrowingBufferReusesItsSizeClass) {
  auto dev = HostDevice::open();
  ASSERT_TRUE(dev.ok());
  constexpr osprey::Index row = 768;  // doubles per row of a 124M key cache
  static_assert(sizeClass(41 * row * sizeof(double)) == sizeClass(42 * row * sizeof(double)));
  auto smaller = (*dev)->allocate(41 * row);
  ASSERT_TRUE(smaller.ok());
  (*dev)->release(*smaller);
  auto larger = (*dev)->allocate(42 * row);
  ASSERT_TRUE(larger.ok());
  EXPECT_EQ(*larger, *smaller) << "the released block of the same class was not handed out again";
  (*larger)[42 * row - 1] = 1.0;  // the whole request fits in the block
  (*dev)->release(*larger);
}

TEST(HostMemory, SizeClassesWasteAtMostAnEighth) {
  for (std::size_t bytes = 1; bytes < (std::size_t{1} << 26); bytes = bytes * 3 / 2 + 7) {
    const std::size_t c = sizeClass(bytes);
    EXPECT_GE(c, bytes);
    if (bytes > 4096) {
      EXPECT_LE(c - bytes, bytes / 8) << bytes;
    }
    EXPECT_EQ(sizeClass(c), c) << "a class is its own class";
  }
}

}  // namespace
