// The width-4 block on the cuda device (gpu/cuda): against the golden file, and bit for bit
// against lists (the same kernels compiled for the device, DESIGN.md §4 "Exact").
#include <gtest/gtest.h>

#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::GpuCuda
#include "block/block_typed_tests.hpp"

namespace osprey::testing {
namespace {

TEST(BlockCrossHandlerCuda, ListsAndGpuCudaAgreeBitForBit) {
  Lists lists = makeHandler<Lists>();
  GpuCuda cuda = makeHandler<GpuCuda>();
  block_cases::handlersAgreeBitForBit(lists, cuda);
}

}  // namespace
}  // namespace osprey::testing
