// GPT-2 (tiny preset) on the cuda device: on its own, and bit for bit against lists (the same
// model header compiled by nvcc for the device; DESIGN.md §4 "Exact"). Runs on a GPU machine.
#include <gtest/gtest.h>

#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::GpuCuda
#include "gpt2/model_typed_tests.hpp"

namespace gpt2::testing {
namespace {

TEST(Gpt2CrossHandlerCuda, ListsAndGpuCudaAgreeBitForBit) {
  osprey::Lists lists = osprey::testing::makeHandler<osprey::Lists>();
  osprey::GpuCuda cuda = osprey::testing::makeHandler<osprey::GpuCuda>();
  handlersAgreeBitForBit(lists, cuda);
}

}  // namespace
}  // namespace gpt2::testing
