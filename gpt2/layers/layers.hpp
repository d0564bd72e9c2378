// Every GPT-2 layer, forward and backward, and the AdamW update: one include for the model and
// the training step. See common.hpp for the dimension legend and conventions.
#pragma once

#include "gpt2/layers/adamw.hpp"
#include "gpt2/layers/attention.hpp"
#include "gpt2/layers/common.hpp"
#include "gpt2/layers/cross_entropy.hpp"
#include "gpt2/layers/encoder.hpp"
#include "gpt2/layers/gelu.hpp"
#include "gpt2/layers/head_loss.hpp"
#include "gpt2/layers/layernorm.hpp"
#include "gpt2/layers/linear.hpp"
#include "gpt2/layers/matmul.hpp"
#include "gpt2/layers/projected.hpp"
#include "gpt2/layers/residual.hpp"
