// GPT-2 on the opencl device: the model's typed tests, and the tiny model's logits and greedy
// continuation against lists' bit for bit (the one model source, traced to OpenCL C).
#define OSPREY_TESTED_HANDLERS ::osprey::GpuOpenCl
#include "gpt2/model_typed_tests.hpp"

namespace gpt2::testing {
namespace {

TEST(Gpt2OnOpenCl, TinyLogitsAndContinuationAreListsBitForBit) {
  osprey::Lists lists;
  auto opencl = osprey::testing::makeHandler<osprey::GpuOpenCl>();
  handlersAgreeBitForBit(lists, opencl);
}

}  // namespace
}  // namespace gpt2::testing
