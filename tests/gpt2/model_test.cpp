// GPT-2 (tiny preset) on the host handlers: each handler on its own (typed), and lists against
// gpu/host bit for bit (logits of every position, 20 greedy tokens).
#include <gtest/gtest.h>

#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::Lists, ::osprey::GpuHost
#include "gpt2/model_typed_tests.hpp"

namespace gpt2::testing {
namespace {

TEST(Gpt2CrossHandler, ListsAndGpuHostAgreeBitForBit) {
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuHost host = osprey::testing::makeHandler<osprey::GpuHost>();
  handlersAgreeBitForBit(lists, host);
}

}  // namespace
}  // namespace gpt2::testing
