// Reading trainer_state.json one checked key at a time: every value a resumed run takes from the
// manifest goes through here, so a hand-edited or damaged file (a step of 2.5, -1 or 1e30, an lr
// of -1, a beta of 2, a string where a number belongs) is an error that names the file, the key,
// what was there and what is allowed, never a silently truncated, wrapped or NaN value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpt2/train/limits.hpp"
#include "osprey/result.hpp"

namespace gpt2::train {

class ManifestReader {
 public:
  // `file` names the manifest in messages; `root` must outlive the reader.
  ManifestReader(const nlohmann::json& root, std::string file) : m_root(root), m_file(std::move(file)) {}

  // Keys are paths of object members joined by '.': "step", "adamw.lr".
  osprey::Result<Index> integer(std::string_view key, const IntLimits& limits) const;
  osprey::Result<std::uint64_t> unsignedInteger(std::string_view key) const;
  osprey::Result<double> real(std::string_view key, const RealLimits& limits) const;
  osprey::Result<std::string> text(std::string_view key) const;

 private:
  osprey::Result<const nlohmann::json*> find(std::string_view key) const;
  osprey::Error problem(std::string_view key, const nlohmann::json& value, const std::string& wanted) const;

  const nlohmann::json& m_root;
  std::string m_file;
};

}  // namespace gpt2::train
