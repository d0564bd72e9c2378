// `osprey-gpt2 tokenize TEXT` prints the token ids, space-separated, on one line;
// `osprey-gpt2 detokenize IDS...` prints the text they stand for, followed by a newline.
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpt2/cli/cli.hpp"

namespace gpt2 {
namespace {

struct TokenizeOptions {
  std::optional<std::string> model;
  std::string text;
  std::vector<int> ids;
};

std::optional<std::filesystem::path> modelDir(const TokenizeOptions& o) {
  if (!o.model) return std::nullopt;
  return std::filesystem::path(*o.model);
}

osprey::Result<void> tokenizeCommand(const TokenizeOptions& o, CliContext& ctx) {
  const auto tokenizer = OSPREY_TRY(tokenizerFor(modelDir(o)));
  const auto ids = OSPREY_TRY(tokenizer.encode(o.text));
  ctx.streams.out << fmt::format("{}\n", fmt::join(ids, " "));
  return {};
}

osprey::Result<void> detokenizeCommand(const TokenizeOptions& o, CliContext& ctx) {
  const auto tokenizer = OSPREY_TRY(tokenizerFor(modelDir(o)));
  ctx.streams.out << OSPREY_TRY(tokenizer.decode(o.ids)) << "\n";
  return {};
}

}  // namespace

void addTokenizeCommands(CLI::App& app, CliContext& ctx) {
  auto tokenize = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "print the GPT-2 token ids of TEXT");
  sub->add_option("--model", tokenize->model, "model directory whose tokenizer to use");
  sub->add_option("text", tokenize->text, "the text")->required();
  sub->callback([tokenize, &ctx] { ctx.result = tokenizeCommand(*tokenize, ctx); });

  auto detokenize = std::make_shared<TokenizeOptions>();
  CLI::App* de = app.add_subcommand("detokenize", "print the text that GPT-2 token ids stand for");
  de->add_option("--model", detokenize->model, "model directory whose tokenizer to use");
  de->add_option("ids", detokenize->ids, "token ids")->required();
  de->callback([detokenize, &ctx] { ctx.result = detokenizeCommand(*detokenize, ctx); });
}

}  // namespace gpt2
