// The layers give the same doubles on lists and gpu/host: a one-block GPT-2, forward, backward,
// AdamW and KV-cache decoding, compared tensor by tensor by bit pattern.
#include <gtest/gtest.h>

#include "layers/cross_handler_cases.hpp"

namespace gpt2::testing {

TEST(LayersCrossHandler, MiniBlockListsEqualsGpuHost) {
  cross_handler_cases::miniBlockIsBitIdentical<osprey::Lists, osprey::GpuHost>();
}

}  // namespace gpt2::testing
