// `osprey-gpt2 export --format llmc [--model PATH | --preset NAME] --out FILE [--dtype f32|bf16]`:
// the chosen model (a Hugging Face directory, a training run's checkpoint/, an llm.c file, or an
// initialisation) as an llm.c checkpoint that train_gpt2.c loads (gpt2/checkpoint/save_llmc.hpp).
// f32 (version 3) is what llm.c's CPU and CUDA trainers read; bf16 (version 5) the CUDA one only.
// An existing --out is replaced only with --overwrite.
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "gpt2/checkpoint/save_llmc.hpp"
#include "gpt2/cli/cli.hpp"

namespace gpt2 {
namespace {

struct ExportOptions {
  ModelRequest model;
  std::string format;
  std::string out;
  std::string dtype = "f32";
  bool overwrite = false;
};

osprey::Result<void> exportCommand(const ExportOptions& o, CliContext& ctx) {
  if (o.format != "llmc") return osprey::Error{fmt::format("unknown --format `{}`: choose llmc", o.format)};
  std::error_code ec;
  if (std::filesystem::is_directory(o.out, ec))
    return osprey::Error{fmt::format("--out {} is a directory: give the checkpoint's file name, e.g. {}/gpt2_124M.bin",
                                     o.out, o.out)};
  if (!o.overwrite && std::filesystem::exists(o.out, ec))
    return osprey::Error{fmt::format("--out {} exists: give --overwrite to replace it", o.out)};
  auto chosen = OSPREY_TRY(chooseModel(o.model));
  if (!chosen.notice.empty()) ctx.streams.err << chosen.notice << "\n";
  const osprey::io::DType dtype = o.dtype == "bf16" ? osprey::io::DType::BF16 : osprey::io::DType::F32;
  const std::uint64_t rounded = OSPREY_TRY(saveLlmcCheckpoint(o.out, chosen.weights, dtype));
  const Config& c = chosen.weights.config;
  ctx.streams.out << fmt::format("wrote {}: llm.c checkpoint (version {}, {}) of GPT-2 ({}), {} parameters, "
                                 "vocabulary padded {} -> {}\n",
                                 o.out, dtype == osprey::io::DType::BF16 ? 5 : 3, osprey::io::dtypeName(dtype),
                                 chosen.label, parameterCount(c), c.V, llmcPaddedVocab(c.V));
  if (rounded > 0)
    ctx.streams.err << fmt::format("note: {} of the {} weights are not {} values and were rounded to the nearest\n",
                                   rounded, parameterCount(c), osprey::io::dtypeName(dtype));
  return {};
}

}  // namespace

void addExportCommand(CLI::App& app, CliContext& ctx) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* sub = app.add_subcommand("export", "write the model in another tool's format (llm.c's checkpoint)");
  addModelOptions(*sub, o->model);
  sub->add_option("--format", o->format, "llmc: llm.c's gpt2_*.bin, as train_gpt2.c loads it")->required();
  sub->add_option("--out", o->out, "the file to write")->required();
  sub->add_option("--dtype", o->dtype, "f32 (version 3, train_gpt2.c and .cu) or bf16 (version 5, train_gpt2.cu)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  sub->add_flag("--overwrite", o->overwrite, "replace --out if it exists");
  sub->callback([o, &ctx] { ctx.result = exportCommand(*o, ctx); });
}

}  // namespace gpt2
