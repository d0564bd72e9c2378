// The width-4 block's golden file (tests/golden/block4.json) and the comparison against it.
//
// The file is written by an independent float64 oracle: tools/oracle/block_reference.py (pure
// Python) or tools/oracle/block.py (PyTorch); its "producer" field says which. Outputs must agree
// to 1e-12 relative: |got - want| <= 1e-12 * max(|want|, 1e-3). The floor keeps the test
// relative for the block's O(1) values while not demanding 12 digits of an element that is
// itself a cancellation residue near zero (both sides compute in float64; their roundings differ).
#pragma once

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "osprey/result.hpp"

namespace osprey::testing::block_golden {

inline constexpr double kRelativeTolerance = 1e-12;
inline constexpr double kMagnitudeFloor = 1e-3;
inline constexpr const char* kRegenerate =
    "regenerate it with `python3 tools/oracle/block_reference.py` (pure Python) or "
    "`python3 tools/oracle/block.py` (PyTorch)";

// Output tensors of the block, in forward order, as named in the golden file.
inline const std::vector<std::string>& outputNames() {
  static const std::vector<std::string> names = {"ln1", "qkv",  "att",  "attn_y", "proj", "x1",
                                                 "ln2", "fc",   "gelu", "mlp",    "out"};
  return names;
}

struct Golden {
  std::string path;
  std::string producer;
  std::map<std::string, std::vector<double>> inputs;   // "x" and every parameter, by name
  std::map<std::string, std::vector<double>> outputs;  // by outputNames()
};

inline Result<Golden> readGolden(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot open the block's golden file; " + kRegenerate};
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    if (doc.at("format").get<int>() != 1)
      return Error{path + ": golden format " + doc.at("format").dump() + ", expected 1; " + kRegenerate};
    Golden g;
    g.path = path;
    g.producer = doc.at("producer").get<std::string>();
    g.inputs["x"] = doc.at("inputs").at("x").get<std::vector<double>>();
    for (const auto& [name, values] : doc.at("params").items()) g.inputs[name] = values.get<std::vector<double>>();
    for (const std::string& name : outputNames()) g.outputs[name] = doc.at("outputs").at(name).get<std::vector<double>>();
    return g;
  } catch (const nlohmann::json::exception& e) {
    return Error{path + ": malformed golden file (" + e.what() + "); " + kRegenerate};
  }
}

inline bool closeEnough(double got, double want) {
  return std::fabs(got - want) <= kRelativeTolerance * std::fmax(std::fabs(want), kMagnitudeFloor);
}

// Empty when every element is close enough; otherwise a report naming each bad element.
inline std::string compare(const std::string& name, const std::vector<double>& got, const std::vector<double>& want) {
  std::ostringstream report;
  report.precision(17);
  if (got.size() != want.size()) {
    report << name << ": " << got.size() << " elements, golden has " << want.size() << "\n";
    return report.str();
  }
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!closeEnough(got[i], want[i]))
      report << name << "[" << i << "] = " << got[i] << ", golden " << want[i] << " (relative "
             << std::fabs(got[i] - want[i]) / std::fmax(std::fabs(want[i]), kMagnitudeFloor) << ")\n";
  return report.str();
}

// The largest relative difference over one tensor (reported, to watch the margin).
inline double worstRelative(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i)
    worst = std::fmax(worst, std::fabs(got[i] - want[i]) / std::fmax(std::fabs(want[i]), kMagnitudeFloor));
  return worst;
}

}  // namespace osprey::testing::block_golden
