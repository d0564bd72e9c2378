// The GPT-2 layers' typed tests: every layer's forward against a host float64 loop, every
// backward against central finite differences, KV-cache decoding against the full forward, once
// per handler in OSPREY_TESTED_HANDLERS. The bodies only call the cases (*_cases.hpp).
#pragma once

#ifndef OSPREY_TESTED_HANDLERS
#error "define OSPREY_TESTED_HANDLERS (e.g. ::osprey::Lists, ::osprey::GpuHost) before including this header"
#endif

#include <gtest/gtest.h>

#include "handlers.hpp"
#include "layers/adamw_cases.hpp"
#include "layers/attention_cases.hpp"
#include "layers/cross_entropy_cases.hpp"
#include "layers/encoder_cases.hpp"
#include "layers/layernorm_cases.hpp"
#include "layers/matmul_cases.hpp"
#include "layers/pointwise_cases.hpp"
#include "layers/sum_cases.hpp"

namespace gpt2::testing {

template <class H>
using LayerTest = osprey::testing::HandlerTest<H>;

using LayerHandlers = ::testing::Types<OSPREY_TESTED_HANDLERS>;
TYPED_TEST_SUITE(LayerTest, LayerHandlers, osprey::testing::HandlerNames);

TYPED_TEST(LayerTest, EncoderForwardMatchesLoop) { encoder_cases::forwardMatchesLoop(this->handler); }
TYPED_TEST(LayerTest, EncoderBackwardMatchesFiniteDifferences) { encoder_cases::backwardMatchesFiniteDifferences(this->handler); }
TYPED_TEST(LayerTest, EncoderBackwardOntoEqualsAdd) { encoder_cases::backwardOntoEqualsAdd(this->handler); }
TYPED_TEST(LayerTest, EncoderRejectsBadTokensAndPositions) { encoder_cases::rejectsBadTokensAndPositions(this->handler); }

TYPED_TEST(LayerTest, LayernormForwardMatchesLoop) { layernorm_cases::forwardMatchesLoop(this->handler); }
TYPED_TEST(LayerTest, LayernormConstantRowGivesBias) { layernorm_cases::constantRowGivesBias(this->handler); }
TYPED_TEST(LayerTest, LayernormBackwardMatchesFiniteDifferences) { layernorm_cases::backwardMatchesFiniteDifferences(this->handler); }
TYPED_TEST(LayerTest, LayernormRejectsWrongShapes) { layernorm_cases::rejectsWrongShapes(this->handler); }

TYPED_TEST(LayerTest, MatmulForwardMatchesLoop) { matmul_cases::forwardMatchesLoop(this->handler); }
TYPED_TEST(LayerTest, MatmulTransposedForwardEqualsPlainProduct) { matmul_cases::transposedForwardEqualsPlainProduct(this->handler); }
TYPED_TEST(LayerTest, MatmulBackwardMatchesFiniteDifferences) { matmul_cases::backwardMatchesFiniteDifferences(this->handler); }
TYPED_TEST(LayerTest, MatmulBackwardSumsInFixedOrder) { matmul_cases::backwardSumsInFixedOrder(this->handler); }
TYPED_TEST(LayerTest, MatmulTransposedBackwardMatchesFiniteDifferences) { matmul_cases::transposedBackwardMatchesFiniteDifferences(this->handler); }
TYPED_TEST(LayerTest, MatmulRejectsWrongShapes) { matmul_cases::rejectsWrongShapes(this->handler); }

TYPED_TEST(LayerTest, AttentionForwardMatchesLoop) { attention_cases::forwardMatchesLoop(this->handler); }
TYPED_TEST(LayerTest, AttentionIsCausal) { attention_cases::attIsCausal(this->handler); }
TYPED_TEST(LayerTest, AttentionBackwardMatchesFiniteDifferences) { attention_cases::backwardMatchesFiniteDifferences(this->handler); }
TYPED_TEST(LayerTest, AttentionDecodeEqualsForwardRows) { attention_cases::decodeEqualsForwardRows(this->handler); }
TYPED_TEST(LayerTest, AttentionAppendRowAppends) { attention_cases::appendRowAppends(this->handler); }
TYPED_TEST(LayerTest, AttentionRejectsHeadsThatDoNotDivide) { attention_cases::rejectsHeadsThatDoNotDivide(this->handler); }
TYPED_TEST(LayerTest, ProjectedAttentionIsItsTwoLayers) { attention_cases::projectedAttentionIsItsTwoLayers(this->handler); }

TYPED_TEST(LayerTest, GeluMatchesLoop) { pointwise_cases::geluMatchesLoop(this->handler); }
TYPED_TEST(LayerTest, GeluBackwardMatchesFiniteDifferences) { pointwise_cases::geluBackwardMatchesFiniteDifferences(this->handler); }
TYPED_TEST(LayerTest, ResidualAddsAndPassesGradientThrough) { pointwise_cases::residualAddsAndPassesGradientThrough(this->handler); }
TYPED_TEST(LayerTest, ResidualPairsAreTheirTwoLayers) { pointwise_cases::residualPairsAreTheirTwoLayers(this->handler); }
TYPED_TEST(LayerTest, ProjectedGeluIsItsTwoLayers) { pointwise_cases::projectedGeluIsItsTwoLayers(this->handler); }

TYPED_TEST(LayerTest, CrossEntropyForwardMatchesLoop) { cross_entropy_cases::forwardMatchesLoop(this->handler); }
TYPED_TEST(LayerTest, CrossEntropyUniformLogitsGiveLogV) { cross_entropy_cases::uniformLogitsGiveLogV(this->handler); }
TYPED_TEST(LayerTest, CrossEntropyBackwardMatchesFiniteDifferences) { cross_entropy_cases::backwardMatchesFiniteDifferences(this->handler); }
TYPED_TEST(LayerTest, CrossEntropyRejectsBadTargets) { cross_entropy_cases::rejectsBadTargets(this->handler); }

TYPED_TEST(LayerTest, OrderedSumsEqualPlainLoops) { sum_cases::orderedSumsEqualPlainLoops(this->handler); }
TYPED_TEST(LayerTest, HeadJoinConcatenates) { sum_cases::joinConcatenates(this->handler); }
TYPED_TEST(LayerTest, HeadProductsEqualPlainProducts) { sum_cases::headProductsEqualPlainProducts(this->handler); }
TYPED_TEST(LayerTest, RowFoldsEqualPlainLoops) { sum_cases::rowFoldsEqualPlainLoops(this->handler); }
TYPED_TEST(LayerTest, RaggedRowFoldsEqualPlainLoops) { sum_cases::raggedRowFoldsEqualPlainLoops(this->handler); }
TYPED_TEST(LayerTest, ManyRaggedRowFoldsEqualPlainLoops) { sum_cases::manyRaggedRowFoldsEqualPlainLoops(this->handler); }
TYPED_TEST(LayerTest, TransposesAndGathersCopyEveryElement) { sum_cases::transposesAndGathersCopyEveryElement(this->handler); }
TYPED_TEST(LayerTest, RowFoldFaultIsItsError) { sum_cases::rowFoldFaultIsItsError(this->handler); }

TYPED_TEST(LayerTest, AdamwThreeStepsMatchTorchFormula) { adamw_cases::threeStepsMatchTorchFormula(this->handler); }
TYPED_TEST(LayerTest, AdamwFirstStepMovesByLearningRate) { adamw_cases::firstStepMovesByLearningRate(this->handler); }
TYPED_TEST(LayerTest, AdamwRejectsBadStepAndShapes) { adamw_cases::rejectsBadStepAndShapes(this->handler); }
TYPED_TEST(LayerTest, AdamwListIsEachTensorsUpdate) { adamw_cases::listIsEachTensorsUpdate(this->handler); }

}  // namespace gpt2::testing
