// The checked reader of trainer_state.json (see manifest_reader.hpp).
#include "gpt2/train/manifest_reader.hpp"

#include <fmt/format.h>

namespace gpt2::train {
namespace {

// How a value is shown in a message: reals by {:g} (JSON has no spelling for the infinity a
// 1e400 in the file parses to), everything else as JSON, cut short.
std::string showValue(const nlohmann::json& v) {
  if (v.is_number_float()) return shown(v.get<double>());
  const std::string text = v.dump();
  const char* kind = v.is_string() ? " (a string)" : v.is_boolean() ? " (a boolean)" : v.is_null() ? "" :
                     v.is_array() ? " (a list)" : v.is_object() ? " (an object)" : "";
  return shown(text) + kind;
}

}  // namespace

osprey::Result<const nlohmann::json*> ManifestReader::find(std::string_view key) const {
  const nlohmann::json* at = &m_root;
  std::size_t from = 0;
  while (true) {
    const std::size_t dot = key.find('.', from);
    const std::string part(key.substr(from, dot == std::string_view::npos ? std::string_view::npos : dot - from));
    if (!at->is_object() || !at->contains(part))
      return osprey::Error{fmt::format("{}: `{}` is missing", m_file, key)};
    at = &(*at)[part];
    if (dot == std::string_view::npos) return at;
    from = dot + 1;
  }
}

osprey::Error ManifestReader::problem(std::string_view key, const nlohmann::json& value,
                                      const std::string& wanted) const {
  return osprey::Error{fmt::format("{}: `{}` is {}: must be {}", m_file, key, showValue(value), wanted)};
}

osprey::Result<Index> ManifestReader::integer(std::string_view key, const IntLimits& limits) const {
  const nlohmann::json& v = *OSPREY_TRY(find(key));
  // Floats are refused even when whole: the file is written with integers, so 2.0 means an edit.
  if (!v.is_number_integer()) return problem(key, v, describe(limits));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxIndex))
    return problem(key, v, describe(limits));
  const auto x = v.get<std::int64_t>();
  if (!within(static_cast<Index>(x), limits)) return problem(key, v, describe(limits));
  return static_cast<Index>(x);
}

osprey::Result<std::uint64_t> ManifestReader::unsignedInteger(std::string_view key) const {
  const nlohmann::json& v = *OSPREY_TRY(find(key));
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  // nlohmann keeps non-negative integers as unsigned, so a signed one here is negative.
  return problem(key, v, "an integer in [0, 2^64)");
}

osprey::Result<double> ManifestReader::real(std::string_view key, const RealLimits& limits) const {
  const nlohmann::json& v = *OSPREY_TRY(find(key));
  if (!v.is_number()) return problem(key, v, describe(limits));
  const double x = v.get<double>();
  if (!within(x, limits)) return problem(key, v, describe(limits));
  return x;
}

osprey::Result<std::string> ManifestReader::text(std::string_view key) const {
  const nlohmann::json& v = *OSPREY_TRY(find(key));
  if (!v.is_string()) return problem(key, v, "a string");
  return v.get<std::string>();
}

}  // namespace gpt2::train
