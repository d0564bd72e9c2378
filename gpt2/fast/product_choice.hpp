// What the fast handler's linear layers' products of more than one row read (forward, backward,
// the lm head): bf16 copies of their float operands, made where a product first reads a buffer
// and kept while it lives (fast/bf16_twins.hpp; the default: the tensor cores' bf16 rate, float
// sums), or the floats themselves on the TF32 tensor cores. Flash attention's tiles (head size 64)
// follow the same choice, and so do the bias gradients (summed in float from dout's twin by the
// weight gradient's product, or from the floats) where dout's producer has not summed them
// (fast/column_sums.hpp); the unfused attention of other head sizes stays TF32. nvcc units only.
#pragma once

#include <cuda_bf16.h>

namespace gpt2::fast_parts {

enum class Products { Bf16, Tf32 };

class ProductChoice {
 public:
  void set(Products products) { m_products = products; }
  Products get() const { return m_products; }
  bool bf16() const { return m_products == Products::Bf16; }
  // body(E{}) with E the element type the products read: bf16 or float.
  template <class Body>
  auto by(Body body) const {
    return bf16() ? body(__nv_bfloat16{}) : body(float{});
  }

 private:
  Products m_products = Products::Bf16;
};

}  // namespace gpt2::fast_parts
