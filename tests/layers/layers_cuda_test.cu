// The GPT-2 layers on the cuda device (gpu/cuda): the same typed tests as on the host handlers,
// and the one-block forward/backward/AdamW/decode bit for bit against lists.
#include <gtest/gtest.h>

#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::GpuCuda
#include "layers/cross_handler_cases.hpp"
#include "layers/layer_typed_tests.hpp"

namespace gpt2::testing {

TEST(LayersCrossHandlerCuda, MiniBlockListsEqualsGpuCuda) {
  cross_handler_cases::miniBlockIsBitIdentical<osprey::Lists, osprey::GpuCuda>();
}

}  // namespace gpt2::testing
