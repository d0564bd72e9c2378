// The derived-operation hook (DESIGN.md §2 "Extensions"): a handler that answers a layer itself
// is chosen at compile time by the layer's public entry point; a handler that does not (every
// exact handler) runs the reference definition written from the primitives.
#include <gtest/gtest.h>

#include "layers/layer_support.hpp"

namespace gpt2::testing {
namespace {

// The lists handler plus a "fused" gelu and layernorm that answer with recognisable values.
struct ListsWithFusedLayers : osprey::Lists {
  osprey::Result<Buffer> geluForward(const Buffer& x) {
    return Buffer(std::vector<Scalar>(x.values().size(), 42.0));
  }
  // Declared here, defined below: the result type names this handler, so it needs it complete.
  osprey::Result<LayerNormOut<ListsWithFusedLayers>> layernormForward(const Buffer&, const Buffer&,
                                                                      const Buffer&, Index N, Index C);
};

osprey::Result<LayerNormOut<ListsWithFusedLayers>> ListsWithFusedLayers::layernormForward(
    const Buffer&, const Buffer&, const Buffer&, Index N, Index C) {
  return LayerNormOut<ListsWithFusedLayers>{Buffer(std::vector<Scalar>(N * C, 7.0)),
                                            Buffer(std::vector<Scalar>(N, 0.0)),
                                            Buffer(std::vector<Scalar>(N, 1.0))};
}
static_assert(osprey::Tensor<ListsWithFusedLayers>);

TEST(LayersDerived, HandlerWithFusedLayerIsChosen) {
  ListsWithFusedLayers h;
  auto x = lift(h, {0.5, -1.0, 2.0});
  EXPECT_EQ(readAll(h, must(gpt2::geluForward(h, x))), (std::vector<Scalar>{42.0, 42.0, 42.0}));
  EXPECT_EQ(readAll(h, must(gpt2::layernormForward(h, x, x, x, 1, 3)).out), (std::vector<Scalar>{7.0, 7.0, 7.0}));
  // The reference stays callable, for checking a fused version against it.
  osprey::Lists plain;
  EXPECT_EQ(readAll(h, must(gpt2::reference::geluForward(h, x))),
            readAll(plain, must(gpt2::geluForward(plain, lift(plain, {0.5, -1.0, 2.0})))));
  // Layers the handler does not answer fall back to the reference.
  EXPECT_EQ(readAll(h, must(gpt2::geluBackward(h, x, x))),
            readAll(plain, must(gpt2::reference::geluBackward(plain, lift(plain, {0.5, -1.0, 2.0}),
                                                              lift(plain, {0.5, -1.0, 2.0})))));
}

}  // namespace
}  // namespace gpt2::testing
