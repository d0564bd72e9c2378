// libFuzzer target: arbitrary bytes as an llm.c checkpoint (`gpt2_124M.bin`), read through
// io::LlmcCheckpoint (src/io/llmc_reader.cpp) and io::TensorFile (src/io/tensor_file.cpp).
//
// The same bytes are also loaded as GPT-2 weights (gpt2::loadCheckpoint, gpt2/checkpoint/load.cpp),
// as `osprey-gpt2 generate --model FILE.bin` does: a refusal names the file, and weights that load
// have the header's config and every tensor's GPT-2 shape.
//
// The reader must never crash, hang or read out of bounds. A file it refuses must be refused with
// a message naming the file. A file it accepts must be exactly as long as its header says, and
// every tensor it lists must read back whole, with its Hugging Face shape, through both entry
// points; names that are not tensors of the file must be refused, never read.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "gpt2/checkpoint/load.hpp"
#include "osprey/io/llmc_checkpoint.hpp"
#include "osprey/io/tensor_file.hpp"

using namespace osprey::io;
using osprey_fuzz::require;

namespace {

std::uint64_t product(const std::vector<osprey::Index>& shape) {
  std::uint64_t n = 1;
  for (osprey::Index d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

// Spellings a layer index must not be accepted in, whatever the file's L.
constexpr std::string_view kNotTensors[] = {
    "", "h.", "h.0", "h.0.", "h..ln_1.weight", "h.-1.ln_1.weight", "h.+0.ln_1.weight", "h.00.ln_1.weight",
    "h.01.ln_1.weight", "h.4096.ln_1.weight", "h.99999999999999999999.ln_1.weight", "h.0.ln_1.weight.",
    "h.0.wte.weight", "ln_1.weight", "wte.weight.", "wte", "transformer.wte.weight", "lm_head.weight",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = (osprey_fuzz::scratchDir() / "model.bin").string();
  osprey_fuzz::writeBytes(path, data, size);

  auto file = LlmcCheckpoint::open(path);
  auto generic = TensorFile::open(path);
  auto model = gpt2::loadCheckpoint(path);
  const bool llmcMagic = size >= 4 && data[0] == 0xc6 && data[1] == 0xd7 && data[2] == 0x34 && data[3] == 0x01;
  if (!file.ok()) {
    require(osprey_fuzz::startsWith(file.error().message, path + ": "), "a refusal names the file");
    if (llmcMagic) require(!generic.ok(), "TensorFile refuses the llm.c file LlmcCheckpoint refuses");
    require(!model.ok(), "no GPT-2 loads from a refused file");
    return 0;
  }
  require(llmcMagic, "an accepted file starts with llm.c's magic");
  require(generic.ok() && generic->isLlmc(), "TensorFile opens an accepted llm.c file as llm.c");

  const LlmcConfig& c = file->config();
  require(checkLlmcConfig(path, c).ok(), "an accepted header passes checkLlmcConfig");
  const std::uint64_t elementBytes = file->version() == kLlmcVersionBF16 ? 2 : 4;
  require(file->version() == kLlmcVersionF32 || file->version() == kLlmcVersionBF16, "a known version");
  require(size == kLlmcHeaderBytes + llmcParameterCount(c) * elementBytes, "the length the header says");

  // A GPT-2 loads from it only when its shapes are a GPT-2 Osprey runs (and then, today, always).
  const gpt2::Config gpt2Config{c.maxT, c.V, c.L, c.NH, c.C};
  if (gpt2::configProblem(gpt2Config)) require(!model.ok(), "no GPT-2 loads with a config Osprey does not run");
  if (!model.ok()) {
    require(osprey_fuzz::startsWith(model.error().message, path + ": "), "a GPT-2 refusal names the file");
  } else {
    require(model->weights.config == gpt2Config && !model->directory, "the header's config, no directory");
    require(gpt2::checkShapes(model->weights, "loaded").ok(), "every tensor with its GPT-2 shape");
  }

  const std::vector<std::string> names = file->names();
  require(names.size() == static_cast<std::size_t>(2 + 12 * c.L + 2), "2 + 12 L + 2 tensors");
  require(generic->names() == names, "TensorFile lists the same tensors");
  std::uint64_t elements = 0;
  for (const std::string& name : names) {
    require(file->contains(name) && generic->contains(name), "a listed tensor is contained");
    auto info = file->info(name);
    require(info.ok(), "a listed tensor has its info");
    require(info->name == name && info->dtype == file->dtype(), "info names the tensor and its dtype");
    require(info->begin <= info->end && info->end <= size - kLlmcHeaderBytes, "a slice inside the file");
    require(info->end - info->begin == product(info->shape) * elementBytes, "a slice as long as its shape");
    auto tensor = file->read(name);
    require(tensor.ok(), "a listed tensor reads");
    require(tensor->shape == info->shape, "read gives the shape info gives");
    require(tensor->values.size() == product(tensor->shape), "as many values as the shape holds");
    elements += tensor->values.size();
    if (name == names.front() || name == names.back()) {
      auto again = generic->read(name);
      require(again.ok() && again->shape == tensor->shape, "TensorFile reads the same tensor");
      for (std::size_t k = 0; k < again->values.size(); ++k) {
        const double a = again->values[k], b = tensor->values[k];
        require(a == b || (a != a && b != b), "TensorFile reads the same values");
      }
    }
  }
  // Every parameter is read exactly once, except wte's padding rows (V..Vp).
  require(elements == llmcParameterCount(c) - static_cast<std::uint64_t>(c.Vp - c.V) * static_cast<std::uint64_t>(c.C),
          "the tensors cover the parameter section, less wte's padding");

  for (std::string_view name : kNotTensors) {
    require(!file->contains(name), "a name that is no tensor is not contained");
    require(!file->read(name).ok() && !file->info(name).ok(), "a name that is no tensor is refused");
  }
  const std::string pastLast = "h." + std::to_string(c.L) + ".ln_1.weight";
  require(!file->contains(pastLast) && !file->read(pastLast).ok(), "layer L does not exist");
  return 0;
}
