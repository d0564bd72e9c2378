// One syntax for every number on the command line. CLI11 reads integers the C way ("010" is 8,
// "0x10" is 16, "-1" wraps to 2^64 - 1 in an unsigned option) and accepts "nan" and "inf" for
// reals; osprey-gpt2 takes decimal integers in the option's range and finite decimal reals only,
// and says so naming the option.
#pragma once

#include <CLI/CLI.hpp>

namespace gpt2 {

// Applies the rule to every integer and real option of `app` and of its subcommands, after they
// are declared and before parsing.
void requireDecimalNumbers(CLI::App& app);

}  // namespace gpt2
