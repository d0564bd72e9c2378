// Raw device pointers both ways on the host device (gpu/raw_pointer.hpp): a buffer's address in
// place, a buffer over memory Osprey did not allocate, and the lifetime rules: the owner is kept
// by every copy and part and released with the last, and the device never takes the memory.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <vector>

#include "osprey/gpu/host/handler.hpp"
#include "osprey/gpu/raw_pointer.hpp"

namespace {

using osprey::bufFromRawDevicePtr;
using osprey::HostDevice;
using osprey::Index;
using osprey::rawDevicePtr;
using osprey::Scalar;

std::shared_ptr<HostDevice> hostDevice() {
  auto dev = HostDevice::open();
  EXPECT_TRUE(dev.ok());
  return *dev;
}

// An owner whose release is seen: a vector of elements held by a shared_ptr that says when it goes.
struct WatchedMemory {
  std::vector<Scalar> values;
  bool* released = nullptr;
  ~WatchedMemory() {
    if (released) *released = true;
  }
};

TEST(RawPointer, RawDevicePtrIsTheBuffersElementsInPlace) {
  auto dev = hostDevice();
  auto x = osprey::toGpu(dev, std::vector<Scalar>{1, 2, 3, 4});
  ASSERT_TRUE(x.ok());
  Scalar* p = rawDevicePtr(*x);
  EXPECT_EQ(p, x->data());
  EXPECT_EQ(p[3], 4.0);
  p[0] = 5.0;  // outside code may write; the buffer sees it
  EXPECT_EQ(*osprey::gpuGet(*x, 0), 5.0);
}

TEST(RawPointer, ABorrowedBufferComputesAsAnyOther) {
  auto dev = hostDevice();
  std::vector<Scalar> outside{1, 2, 3, 4};
  auto x = bufFromRawDevicePtr(dev, outside.data(), 4);
  ASSERT_TRUE(x.ok()) << x.error().message;
  EXPECT_EQ(rawDevicePtr(*x), outside.data());
  auto y = osprey::gpuMatMul(*x, *x, 2, 2, 2);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*osprey::fromGpu(*y), (std::vector<Scalar>{7, 10, 15, 22}));
  EXPECT_NE(rawDevicePtr(*y), outside.data()) << "a result is a buffer of its own";
}

TEST(RawPointer, TheOwnerGoesWithTheLastCopyOrPart) {
  auto dev = hostDevice();
  bool released = false;
  auto memory = std::make_shared<WatchedMemory>();
  memory->values = {1, 2, 3, 4, 5, 6};
  memory->released = &released;
  Scalar* p = memory->values.data();
  auto x = bufFromRawDevicePtr(dev, p, 6, std::shared_ptr<const void>(memory));
  ASSERT_TRUE(x.ok());
  memory.reset();
  EXPECT_FALSE(released) << "the buffer holds its owner";
  auto tail = x->part(4, 2);
  auto copy = *x;
  x = osprey::Result<osprey::GpuBuffer<HostDevice>>(osprey::Error{"dropped"});
  copy = {};
  EXPECT_FALSE(released) << "a part holds the owner too";
  EXPECT_EQ(*osprey::gpuGet(tail, 1), 6.0);
  EXPECT_EQ(rawDevicePtr(tail), p + 4);
  tail = {};
  EXPECT_TRUE(released) << "the last part gone, the owner is released";
}

TEST(RawPointer, TheDeviceNeverTakesBorrowedMemory) {
  auto dev = hostDevice();
  std::vector<Scalar> outside(64, 1.5);
  {
    auto x = bufFromRawDevicePtr(dev, outside.data(), 64);
    ASSERT_TRUE(x.ok());
  }
  // Had the device's cache taken the block, the next buffer of its size would be handed it.
  auto fresh = dev->allocate(64);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(*fresh, outside.data());
  dev->release(*fresh);
  EXPECT_EQ(outside[63], 1.5);
}

TEST(RawPointer, BothWaysShareOneBlock) {
  auto dev = hostDevice();
  auto x = osprey::toGpu(dev, std::vector<Scalar>{1, 2, 3, 4});
  ASSERT_TRUE(x.ok());
  Scalar* p = rawDevicePtr(*x);
  auto y = bufFromRawDevicePtr(dev, p, 4, std::shared_ptr<const void>(x->memory()));
  ASSERT_TRUE(y.ok());
  x = osprey::Result<osprey::GpuBuffer<HostDevice>>(osprey::Error{"dropped"});
  // x's block is still y's: not back in the cache, its values intact.
  auto other = dev->allocate(4);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, p);
  dev->release(*other);
  EXPECT_EQ(*osprey::fromGpu(*y), (std::vector<Scalar>{1, 2, 3, 4}));
}

TEST(RawPointer, EmptyBuffersNeedNoAddress) {
  auto dev = hostDevice();
  auto x = bufFromRawDevicePtr<Scalar>(dev, nullptr, 0);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->size(), 0);
  EXPECT_EQ(osprey::fromGpu(*x)->size(), 0u);
}

TEST(RawPointer, WhatCannotBeABufferIsAnError) {
  auto dev = hostDevice();
  std::array<Scalar, 4> values{};
  auto negative = bufFromRawDevicePtr(dev, values.data(), -1);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().message, "bufFromRawDevicePtr: negative length -1");
  auto null = bufFromRawDevicePtr<Scalar>(dev, nullptr, 3);
  ASSERT_FALSE(null.ok());
  EXPECT_EQ(null.error().message, "bufFromRawDevicePtr: a null address for 3 elements");
  auto* misaligned = reinterpret_cast<Scalar*>(reinterpret_cast<char*>(values.data()) + 1);
  auto skewed = bufFromRawDevicePtr(dev, misaligned, 2);
  ASSERT_FALSE(skewed.ok());
  EXPECT_NE(skewed.error().message.find("is not aligned to the 8 bytes of an element"), std::string::npos)
      << skewed.error().message;
  auto noDevice = bufFromRawDevicePtr(std::shared_ptr<HostDevice>(), values.data(), 4);
  ASSERT_FALSE(noDevice.ok());
  EXPECT_EQ(noDevice.error().message, "bufFromRawDevicePtr: no device");
}

}  // namespace
