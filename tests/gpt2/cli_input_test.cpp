// The command line's numbers, options and output as a careless or hostile user meets them: one
// number syntax (decimal, in range, finite), options that do not apply to the chosen backend are
// errors, and output that cannot be written fails the command.
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpt2/cli/cli.hpp"
#include "gpt2/cli/run.hpp"
#include "train/cli_run.hpp"

namespace gpt2 {
namespace {

using osprey::testing::train::CliRun;
CliRun cliRun(const std::vector<std::string>& args) { return osprey::testing::train::runOsprey(args); }

// A refused command: status 1 (an error of ours) or 105..109 (CLI11's parse errors), nothing on
// stdout, and `words` in the message.
void expectRefused(const std::vector<std::string>& args, const std::string& words) {
  SCOPED_TRACE(::testing::PrintToString(args));
  const CliRun r = cliRun(args);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 400u) << "a message short enough to read: " << r.err;
}

TEST(Gpt2CliInput, IntegersAreDecimalOnly) {
  expectRefused({"detokenize", "0x10"}, "`0x10` is not a decimal integer");
  expectRefused({"detokenize", ""}, "`` is not a decimal integer");
  expectRefused({"detokenize", "1e3"}, "`1e3` is not a decimal integer");
  expectRefused({"detokenize", "+5"}, "`+5` is not a decimal integer");
  expectRefused({"detokenize", "0b11"}, "`0b11` is not a decimal integer");
  expectRefused({"init", "--preset", "tiny", "--seed", "-1", "--out", "/nonexistent/never-written"},
                "-1 is negative");
  expectRefused({"generate", "--preset", "tiny", "--prompt", "a", "--tokens", "0x3"}, "`0x3` is not a decimal integer");
  expectRefused({"generate", "--preset", "tiny", "--prompt", "a", "--tokens", "99999999999999999999999"}, "is out of range (the most this option holds is 9223372036854775807)");
}

// A leading zero does not make a number octal: 010 is ten, as it reads.
TEST(Gpt2CliInput, LeadingZerosAreDecimal) {
  const CliRun ten = cliRun({"detokenize", "010"});
  const CliRun plain = cliRun({"detokenize", "10"});
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(ten.status, 0) << ten.err;
  EXPECT_EQ(ten.out, plain.out);
  EXPECT_NE(cliRun({"detokenize", "8"}).out, ten.out);
}

TEST(Gpt2CliInput, RealsAreFiniteDecimals) {
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "0x1p-3", "1e999", "", "1.0.0", "3abc"}) {
    expectRefused({"train-step", "--preset", "tiny", "--data", "/nonexistent", "--lr", bad}, "--lr");
  }
}

// Counts and sizes say their real range, not double's 309-digit maximum.
TEST(Gpt2CliInput, RangesReadAsTheyMean) {
  const CliRun r = cliRun({"train-step", "--preset", "tiny", "--data", "/nonexistent", "--batch", "0"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("0 is out of range: more than 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("179769"), std::string::npos) << r.err;
  const CliRun steps = cliRun({"train", "--preset", "tiny", "--data", "/nonexistent", "--steps", "-3"});
  EXPECT_NE(steps.status, 0);
  EXPECT_EQ(steps.err.find("179769"), std::string::npos) << steps.err;
}

TEST(Gpt2CliInput, OptionsThatDoNotApplyAreErrors) {
  expectRefused({"generate", "--preset", "tiny", "--prompt", "a", "--decode-weights", "float"},
                "--decode-weights float applies to the fast backend; the lists backend");
  expectRefused({"generate", "--preset", "tiny", "--prompt", "a", "--backend", "gpu", "--decode-weights", "bf16"},
                "--decode-weights bf16 applies to the fast backend; the gpu backend");
  expectRefused({"train", "--preset", "tiny", "--data", "/nonexistent", "--steps", "1", "--grad-sum", "exact"},
                "--grad-sum exact applies to the gpu backend's several ranks; the lists backend");
  expectRefused({"generate", "--preset", "tiny", "--prompt", "a", "--backend", "gpu", "--device", ""},
                "an empty device name");
  expectRefused({"generate", "--preset", "tiny", "--prompt", "a", "--device", "host"},
                "device `host` applies to the gpu backend; the lists backend runs on the host");
}

// A stream buffer that refuses every byte, as a full disk or a closed pipe does.
class FullDisk : public std::streambuf {
 protected:
  int_type overflow(int_type) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

TEST(Gpt2CliInput, OutputThatCannotBeWrittenFailsTheCommand) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"osprey-gpt2", "tokenize", "Hello world"},
        std::vector<std::string>{"osprey-gpt2", "detokenize", "15496", "995"}}) {
    SCOPED_TRACE(args[1]);
    FullDisk full;
    std::ostream out(&full);
    std::ostringstream err;
    EXPECT_EQ(runCli(args, hostEntries(), out, err), 1);
    EXPECT_NE(err.str().find("cannot write the output"), std::string::npos) << err.str();
  }
}

}  // namespace
}  // namespace gpt2
