// The width-4 transformer block on the host handlers: each against the golden file (typed), and
// lists against gpu/host bit for bit.
#include <gtest/gtest.h>

#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::Lists, ::osprey::GpuHost
#include "block/block_typed_tests.hpp"

namespace osprey::testing {
namespace {

TEST(BlockCrossHandler, ListsAndGpuHostAgreeBitForBit) {
  Lists lists = makeHandler<Lists>();
  GpuHost host = makeHandler<GpuHost>();
  block_cases::handlersAgreeBitForBit(lists, host);
}

}  // namespace
}  // namespace osprey::testing
