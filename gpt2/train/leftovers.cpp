// Choosing among DIR/checkpoint.old-* (see leftovers.hpp).
#include "gpt2/train/leftovers.hpp"

#include <string>

#include "gpt2/train/checkpoint.hpp"
#include "osprey/io/input_file.hpp"

namespace fs = std::filesystem;

namespace gpt2::train {

std::optional<OldCheckpoint> newestOldCheckpoint(const fs::path& saveDir) {
  std::optional<OldCheckpoint> best;
  std::size_t candidates = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(saveDir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint.old-", 0) != 0) continue;
    auto text = osprey::io::readWholeFile((entry.path() / "trainer_state.json").string());
    if (!text.ok()) continue;
    auto state = parseTrainerState(*text, name);
    if (!state.ok()) continue;
    ++candidates;
    const bool newer = !best || state->step > best->step ||
                       (state->step == best->step && name > best->dir.filename().string());
    if (newer) best = OldCheckpoint{entry.path(), state->step, 0};
  }
  if (best) best->candidates = candidates;
  return best;
}

}  // namespace gpt2::train
