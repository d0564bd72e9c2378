// osprey-gpt2's command line: one CLI11 app, one setup function per subcommand.
//
//   generate    greedy continuation of a prompt, streamed      (cli_generate.cpp)
//   logits      the last prompt position's logits               (cli_logits.cpp)
//   tokenize    text -> ids;  detokenize  ids -> text           (cli_tokenize.cpp)
//   init        write a freshly initialised model directory     (cli_init.cpp)
//   train-step  one training step: loss, gradient sums          (cli_train_step.cpp)
//   train       the training loop                               (cli_train.cpp)
//   export      the model as an llm.c checkpoint                (export.cpp)
//
// A subcommand is a function `void addXCommand(CLI::App&, CliContext&)` that registers its
// options and a callback; the callback stores its outcome in ctx.result. runCli lists them all
// (cli.cpp): adding a subcommand is one new file and one line there.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpt2/checkpoint/find.hpp"
#include "gpt2/cli/run.hpp"
#include "osprey/result.hpp"

namespace gpt2 {

struct CliContext {
  HandlerEntries entries;                // the handlers this program links
  Streams streams;                       // stdout / stderr (string streams in tests)
  osprey::Result<void> result = {};      // what the subcommand that ran reports
  std::vector<std::string> args;         // the command line as given (a launcher re-runs it)
};

// Runs osprey-gpt2 with `args` (args[0] is the program name). Returns the exit status: 0 on
// success, 1 with "osprey-gpt2: error: ..." on stderr for a failed run, CLI11's status for a
// usage error.
int runCli(const std::vector<std::string>& args, const HandlerEntries& entries, std::ostream& out,
           std::ostream& err);

// The subcommands.
void addGenerateCommand(CLI::App& app, CliContext& ctx);
void addLogitsCommand(CLI::App& app, CliContext& ctx);
void addTokenizeCommands(CLI::App& app, CliContext& ctx);
void addInitCommand(CLI::App& app, CliContext& ctx);
void addTrainStepCommand(CLI::App& app, CliContext& ctx);  // cli_train_step.cpp
void addTrainCommand(CLI::App& app, CliContext& ctx);      // cli_train.cpp
void addExportCommand(CLI::App& app, CliContext& ctx);     // export.cpp

// Options several subcommands share (cli_options.cpp).
void addModelOptions(CLI::App& sub, ModelRequest& request);     // --model, --preset, --seed
void addBackendOptions(CLI::App& sub, BackendChoice& choice);   // --backend, --device

// The tokenizer for a chosen model: its directory's files, else the fallbacks of
// findTokenizerDir.
osprey::Result<Tokenizer> tokenizerFor(const std::optional<std::filesystem::path>& modelDir);

}  // namespace gpt2
