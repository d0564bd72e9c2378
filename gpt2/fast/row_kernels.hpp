// The fast handler's fused float kernels for GPT-2's row-wise layers: LayerNorm (forward and
// backward), softmax cross-entropy (forward and backward) and GELU. Each is the reference
// definition of its layer (layers/layernorm.hpp, cross_entropy.hpp, gelu.hpp: the formulas are
// repeated beside each kernel) in one pass over the row instead of a row fold and a build per
// statistic, in float with warp- or block-wide sums; and AdamW over a step's tensors, and the
// check of its new weights for NaN and infinities. One file a
// layer under gpt2/fast/kernels/; this header gathers them. nvcc units only.
#pragma once

#include "gpt2/fast/kernels/adamw.hpp"
#include "gpt2/fast/kernels/cross_entropy.hpp"
#include "gpt2/fast/kernels/gelu.hpp"
#include "gpt2/fast/kernels/layernorm.hpp"
#include "gpt2/fast/kernels/non_finite.hpp"
#include "gpt2/fast/kernels/row_walks.hpp"
