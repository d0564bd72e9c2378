// The GPT-2 layers on the cuda device (gpu/cuda): the same typed tests as on the host handlers,
// and the one-block forward/backward/AdamW/decode bit for bit against lists.
//
// The typed cases include layers that must return a kernel fault themselves (a bad token id in
// the encoder, a bad target in the cross-entropy), so they run with every launch checked as it
// completes (GpuCudaEachLaunch); the cross-handler block runs with the default deferred checks.
#include <gtest/gtest.h>

#include "cuda/cuda_each_launch_handler.hpp"
#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::testing::GpuCudaEachLaunch
#include "layers/cross_handler_cases.hpp"
#include "layers/layer_typed_tests.hpp"

namespace gpt2::testing {

TEST(LayersCrossHandlerCuda, MiniBlockListsEqualsGpuCuda) {
  cross_handler_cases::miniBlockIsBitIdentical<osprey::Lists, osprey::GpuCuda>();
}

}  // namespace gpt2::testing
