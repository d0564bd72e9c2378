// lists, gpu/host and gpu/cuda answer the same computations with the same bits.
#include <gtest/gtest.h>

#include "effect/cross_handler_cases.hpp"
#include "handlers.hpp"

namespace osprey::testing {
namespace {

TEST(CrossHandlerCuda, ElementwisePipelineListsVsGpuCudaIsBitIdentical) {
  Lists lists = makeHandler<Lists>();
  GpuCuda cuda = makeHandler<GpuCuda>();
  cross_handler::elementwisePipelineIsBitIdentical(lists, cuda);
}

TEST(CrossHandlerCuda, MatMulListsVsGpuCudaIsBitIdenticalOnHostTileEdges) {
  Lists lists = makeHandler<Lists>();
  GpuCuda cuda = makeHandler<GpuCuda>();
  cross_handler::matMulIsBitIdentical(lists, cuda);
}

TEST(CrossHandlerCuda, MatMulGpuHostVsGpuCudaIsBitIdenticalOnHostTileEdges) {
  GpuHost host = makeHandler<GpuHost>();
  GpuCuda cuda = makeHandler<GpuCuda>();
  cross_handler::matMulIsBitIdentical(host, cuda);
}

}  // namespace
}  // namespace osprey::testing
