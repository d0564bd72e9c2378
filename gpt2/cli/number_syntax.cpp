// See number_syntax.hpp.
#include "gpt2/cli/number_syntax.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace gpt2 {
namespace {

bool isDigits(const std::string& s, std::size_t from) {
  if (from >= s.size()) return false;
  for (std::size_t i = from; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// "007" -> "7", "-007" -> "-7": the decimal value, which CLI11 would otherwise read as octal.
std::string withoutLeadingZeros(const std::string& s) {
  const std::size_t sign = s[0] == '-' ? 1 : 0;
  std::size_t first = s.find_first_not_of('0', sign);
  if (first == std::string::npos) return "0";
  return s.substr(0, sign) + s.substr(first);
}

// Integers: optional '-' (signed options only), then decimal digits.
CLI::Validator decimalInteger(bool isSigned) {
  return CLI::Validator(
      [isSigned](std::string& value) -> std::string {
        const bool negative = !value.empty() && value[0] == '-';
        if (negative && !isSigned) return fmt::format("{} is negative: this option takes an integer of 0 or more", value);
        if (!isDigits(value, negative ? 1 : 0)) return fmt::format("`{}` is not a decimal integer", value);
        value = withoutLeadingZeros(value);
        // CLI11 reads with strtoll/strtoull and keeps a saturated result: refuse what does not fit.
        std::int64_t asSigned = 0;
        std::uint64_t asUnsigned = 0;
        const char* end = value.data() + value.size();
        const bool fits = isSigned ? std::from_chars(value.data(), end, asSigned).ec == std::errc()
                                   : std::from_chars(value.data(), end, asUnsigned).ec == std::errc();
        if (!fits)
          return fmt::format("{} is out of range (the most this option holds is {})",
                             value.size() > 40 ? value.substr(0, 40) + "..." : value,
                             isSigned ? std::to_string(INT64_MAX) : std::to_string(UINT64_MAX));
        return {};
      },
      "", "decimal integer");
}

// Reals: what strtod reads in full, finite (no nan, inf, hex floats or out-of-range values).
CLI::Validator finiteReal() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const bool hex = value.find_first_of("xX") != std::string::npos;
        char* end = nullptr;
        const double x = value.empty() || hex ? 0.0 : std::strtod(value.c_str(), &end);
        const std::string shown = value.size() > 40 ? value.substr(0, 40) + "..." : value;
        if (value.empty() || hex || end != value.c_str() + value.size())
          return fmt::format("`{}` is not a decimal number", shown);
        if (!std::isfinite(x)) return fmt::format("`{}` is not a finite number", shown);
        return {};
      },
      "", "finite decimal number");
}

// CLI11's PositiveNumber and NonNegativeNumber are ranges up to double's maximum, whose message
// prints that 309-digit bound ("Value 0 not in range 2.2e-308 to 1797693..."): the same checks,
// worded as what they mean.
CLI::Validator sign(bool zeroAllowed) {
  return CLI::Validator(
      [zeroAllowed](std::string& value) -> std::string {
        const double x = std::strtod(value.c_str(), nullptr);
        if (zeroAllowed ? x < 0.0 : !(x > 0.0))
          return fmt::format("{} is out of range: {}", value, zeroAllowed ? "0 or more" : "more than 0");
        return {};
      },
      zeroAllowed ? "0 or more" : "more than 0");
}

void replaceRange(CLI::Option& option, const char* name, bool zeroAllowed) {
  try {
    option.get_validator(name)->active(false);
  } catch (const CLI::OptionNotFound&) {
    return;
  }
  option.check(sign(zeroAllowed));
}

}  // namespace

void requireDecimalNumbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    // The option's own type, before the ":DESCRIPTION" its validators append.
    const std::string full = option->get_type_name();
    const std::string type = full.substr(0, full.find(':'));
    if (type == "INT")
      option->transform(decimalInteger(true));
    else if (type == "UINT")
      option->transform(decimalInteger(false));
    else if (type == "FLOAT" || type == "NUMBER")
      option->transform(finiteReal());
    replaceRange(*option, "POSITIVE", false);
    replaceRange(*option, "NONNEGATIVE", true);
  }
  for (CLI::App* sub : app.get_subcommands({})) requireDecimalNumbers(*sub);
}

}  // namespace gpt2
