// The width-4 block run under one handler: its outputs against the golden file, and the pieces
// the cross-handler test compares bit for bit. Written once over the handler H.
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "block/block.hpp"
#include "block/block_init.hpp"
#include "block/block_golden.hpp"
#include "handlers.hpp"

namespace osprey::testing::block_cases {

inline std::string goldenPath() { return std::string(OSPREY_SOURCE_DIR) + "/tests/golden/block4.json"; }

// Every output of one forward pass, on the host, by golden name.
template <class H>
Result<std::map<std::string, std::vector<Scalar>>> runBlock(H& h) {
  const block::HostValues values = block::makeHostValues();
  auto x = OSPREY_TRY(block::liftInput(h, values));
  auto params = OSPREY_TRY(block::liftParams(h, values));
  auto o = OSPREY_TRY(block::forward(h, x, params));
  return std::map<std::string, std::vector<Scalar>>{
      {"ln1", readAll(h, o.ln1)},     {"qkv", readAll(h, o.qkv)}, {"att", readAll(h, o.att)},
      {"attn_y", readAll(h, o.attnY)}, {"proj", readAll(h, o.proj)}, {"x1", readAll(h, o.x1)},
      {"ln2", readAll(h, o.ln2)},     {"fc", readAll(h, o.fc)},   {"gelu", readAll(h, o.gelu)},
      {"mlp", readAll(h, o.mlp)},     {"out", readAll(h, o.out)},
  };
}

// The golden file was made from the same generator: its inputs must be ours, bit for bit, or the
// comparison below would be between different blocks.
inline void goldenInputsAreOurs(const block_golden::Golden& g) {
  const block::HostValues values = block::makeHostValues();
  ASSERT_EQ(g.inputs.size(), values.tensors.size()) << g.path << ": tensor count";
  for (const auto& [name, ours] : values.tensors) {
    auto it = g.inputs.find(name);
    ASSERT_NE(it, g.inputs.end()) << g.path << " lacks `" << name << "`; " << block_golden::kRegenerate;
    EXPECT_EQ(firstBitDifference(it->second, ours), ours.size())
        << name << ": the golden file's values differ from tests/block/block_init.hpp's generator; "
        << block_golden::kRegenerate;
  }
}

template <class H>
void outputsMatchTheGolden(H& h) {
  auto golden = block_golden::readGolden(goldenPath());
  ASSERT_TRUE(golden.ok()) << golden.error().message;
  goldenInputsAreOurs(*golden);
  auto got = runBlock(h);
  ASSERT_TRUE(got.ok()) << got.error().message;
  std::string failures;
  for (const std::string& name : block_golden::outputNames()) {
    failures += block_golden::compare(name, got->at(name), golden->outputs.at(name));
    std::ostringstream worst;
    worst << block_golden::worstRelative(got->at(name), golden->outputs.at(name));
    ::testing::Test::RecordProperty("worst_relative_" + name, worst.str());
  }
  EXPECT_TRUE(failures.empty()) << "block outputs on " << h.device() << " differ from " << golden->path
                                << " (made by " << golden->producer << ") beyond 1e-12 relative:\n"
                                << failures << "If the oracle changed, " << block_golden::kRegenerate << ".";
}

// A block whose parameter has the wrong size is an error naming that parameter.
template <class H>
void wrongParameterShapeIsAnError(H& h) {
  block::HostValues values = block::makeHostValues();
  auto x = block::liftInput(h, values);
  auto params = block::liftParams(h, values);
  ASSERT_TRUE(x.ok() && params.ok());
  const std::vector<Scalar> shortBias(3, 0.0);
  auto bad = h.fromList(shortBias);
  ASSERT_TRUE(bad.ok());
  params->fcBias = *bad;
  auto o = block::forward(h, *x, *params);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message, "block: mlp.c_fc.bias has 3 elements, expected 16");
}

// Two handlers run the block to the same bits, every output element (bit patterns, no tolerance).
template <class A, class B>
void handlersAgreeBitForBit(A& a, B& b) {
  auto x = runBlock(a);
  auto y = runBlock(b);
  ASSERT_TRUE(x.ok()) << a.device() << ": " << x.error().message;
  ASSERT_TRUE(y.ok()) << b.device() << ": " << y.error().message;
  for (const std::string& name : block_golden::outputNames()) {
    const auto& p = x->at(name);
    const auto& q = y->at(name);
    const std::size_t at = firstBitDifference(p, q);
    EXPECT_TRUE(p.size() == q.size() && at == p.size())
        << name << "[" << at << "]: " << a.device() << " " << (at < p.size() ? p[at] : 0.0) << " vs "
        << b.device() << " " << (at < q.size() ? q[at] : 0.0) << " (bit patterns differ)";
  }
}

}  // namespace osprey::testing::block_cases
