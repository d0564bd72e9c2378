// libFuzzer target: arbitrary bytes as a Hugging Face GPT-2 `config.json`, read through
// gpt2::readHfConfig (gpt2/checkpoint/config.cpp).
//
// The reader must never crash or let an exception out. A file it refuses must be refused with a
// message naming the file, and the text alone (parseHfConfig) must be judged the same way. A
// config it accepts must be a GPT-2 Osprey runs (configProblem finds nothing), and the
// config.json Osprey writes for it (hfConfigText) must read back as the same config.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "gpt2/checkpoint/config.hpp"

using osprey_fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = (osprey_fuzz::scratchDir() / "config.json").string();
  osprey_fuzz::writeBytes(path, data, size);
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto config = gpt2::readHfConfig(path);
  auto direct = gpt2::parseHfConfig(text, path);
  require(config.ok() == direct.ok(), "the file and its text are judged alike");
  if (!config.ok()) {
    require(osprey_fuzz::startsWith(config.error().message, path + ": "), "a refusal names the file");
    require(config.error().message == direct.error().message, "the same refusal from the text");
    return 0;
  }
  require(*config == *direct, "the same config from the text");
  require(!gpt2::configProblem(*config).has_value(), "an accepted config is one Osprey runs");

  auto again = gpt2::parseHfConfig(gpt2::hfConfigText(*config), "written config.json");
  require(again.ok() && *again == *config, "the config.json Osprey writes reads back the same");
  return 0;
}
