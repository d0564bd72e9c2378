// runCli: the osprey-gpt2 app and its list of subcommands (see cli.hpp).
#include "gpt2/cli/cli.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "gpt2/cli/number_syntax.hpp"

namespace gpt2 {

int runCli(const std::vector<std::string>& args, const HandlerEntries& entries, std::ostream& out,
           std::ostream& err) {
  CLI::App app{"osprey-gpt2: GPT-2 written once, run on the lists or gpu handler", "osprey-gpt2"};
  app.require_subcommand(1);
  CliContext ctx{entries, Streams{out, err}, {}, args};

  addGenerateCommand(app, ctx);
  addLogitsCommand(app, ctx);
  addTokenizeCommands(app, ctx);
  addInitCommand(app, ctx);
  addTrainStepCommand(app, ctx);
  addTrainCommand(app, ctx);
  addExportCommand(app, ctx);
  requireDecimalNumbers(app);

  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }
  out.flush();
  if (!ctx.result.ok()) {
    err << "osprey-gpt2: error: " << ctx.result.error().message << "\n";
    err.flush();
    return 1;
  }
  // Output that did not arrive (a full disk, a closed pipe) is a failed command, not a success.
  if (!out) {
    const int cause = errno;
    err << "osprey-gpt2: error: cannot write the output"
        << (cause ? std::string(": ") + std::strerror(cause) : std::string()) << "\n";
    err.flush();
    return 1;
  }
  return 0;
}

}  // namespace gpt2
