// lists and gpu/host answer the same computations with the same bits.
#include <gtest/gtest.h>

#include "effect/cross_handler_cases.hpp"
#include "handlers.hpp"

namespace osprey::testing {
namespace {

TEST(CrossHandler, ElementwisePipelineListsVsGpuHostIsBitIdentical) {
  Lists lists = makeHandler<Lists>();
  GpuHost host = makeHandler<GpuHost>();
  cross_handler::elementwisePipelineIsBitIdentical(lists, host);
}

TEST(CrossHandler, MatMulListsVsGpuHostIsBitIdenticalOnTileEdges) {
  Lists lists = makeHandler<Lists>();
  GpuHost host = makeHandler<GpuHost>();
  cross_handler::matMulIsBitIdentical(lists, host);
}

}  // namespace
}  // namespace osprey::testing
