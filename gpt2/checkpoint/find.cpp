// Choosing the GPT-2 a run uses (see checkpoint_find.hpp for the order).
#include "gpt2/checkpoint/find.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpt2/checkpoint/load.hpp"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

fs::path hubDir() {
  if (auto v = environment("HF_HUB_CACHE")) return *v;
  if (auto v = environment("HF_HOME")) return fs::path(*v) / "hub";
  if (auto v = environment("XDG_CACHE_HOME")) return fs::path(*v) / "huggingface" / "hub";
  if (auto v = environment("HOME")) return fs::path(*v) / ".cache" / "huggingface" / "hub";
  return fs::path(".cache") / "huggingface" / "hub";
}

bool isCompleteModelDir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec) && fs::is_regular_file(dir / "model.safetensors", ec);
}

ChosenModel fromCheckpoint(LoadedCheckpoint loaded) {
  ChosenModel chosen{std::move(loaded.weights), "", loaded.directory, ""};
  chosen.label = sizeLabel(chosen.weights.config);
  return chosen;
}

ChosenModel initialised(const Config& config, std::uint64_t seed, std::string notice) {
  return ChosenModel{initialWeights(config, seed), sizeLabel(config), std::nullopt, std::move(notice)};
}

}  // namespace

std::vector<fs::path> huggingFaceCacheDirs(std::string_view hubName) {
  std::vector<fs::path> dirs;
  const fs::path hub = hubDir();
  const std::string name(hubName);
  for (const std::string& repo : {"models--openai-community--" + name, "models--" + name}) {
    const fs::path root = hub / repo;
    std::error_code ec;
    // refs/main names the snapshot the hub's "main" pointed at when it was downloaded.
    std::ifstream ref(root / "refs" / "main");
    std::string commit;
    if (ref && std::getline(ref, commit) && !commit.empty()) dirs.push_back(root / "snapshots" / commit);
    std::vector<fs::path> snapshots;
    for (fs::directory_iterator it(root / "snapshots", ec), end; !ec && it != end; it.increment(ec))
      snapshots.push_back(it->path());
    std::sort(snapshots.begin(), snapshots.end());
    for (auto& s : snapshots)
      if (std::find(dirs.begin(), dirs.end(), s) == dirs.end()) dirs.push_back(s);
    if (snapshots.empty() && commit.empty()) dirs.push_back(root / "snapshots" / "*");
  }
  return dirs;
}

osprey::Result<ChosenModel> chooseModel(const ModelRequest& request) {
  if (request.model && request.preset)
    return osprey::Error{"give --model or --preset, not both (--preset starts a fresh initialisation)"};
  if (request.model) {
    // A path that exists is read as one; otherwise a Hugging Face model name ("gpt2-xl",
    // "openai-community/gpt2-xl") is that model's snapshot in the cache, as transformers finds it.
    std::error_code ec;
    const Preset* named = presetEntry(*request.model);
    if (named && !named->hubName.empty() && !fs::exists(*request.model, ec)) {
      std::vector<std::string> looked;
      for (const fs::path& dir : huggingFaceCacheDirs(named->hubName)) {
        if (isCompleteModelDir(dir)) return fromCheckpoint(OSPREY_TRY(loadCheckpoint(dir)));
        looked.push_back(dir.string());
      }
      return osprey::Error{fmt::format(
          "--model {}: no such file or directory, and no Hugging Face cache snapshot of {}{} (looked in {}); "
          "download it (scripts/download-gpt2.sh DIR {}, then --model DIR), or use --preset {} for GPT-2's "
          "initialisation of its shape",
          *request.model, kHubOrganisation, named->hubName, fmt::join(looked, ", "), named->hubName,
          named->name)};
    }
    return fromCheckpoint(OSPREY_TRY(loadCheckpoint(*request.model)));
  }
  if (request.preset) {
    auto config = presetNamed(*request.preset);
    if (!config)
      return osprey::Error{fmt::format("unknown preset `{}`: choose {}", *request.preset, presetChoices())};
    return initialised(*config, request.seed,
                       fmt::format("osprey: --preset {}: using GPT-2's initialisation with seed {} — "
                                   "the output is not meaningful text",
                                   *request.preset, request.seed));
  }
  if (auto env = environment("OSPREY_GPT2")) {
    auto loaded = loadCheckpoint(*env);
    if (!loaded.ok()) return osprey::Error{"$OSPREY_GPT2: " + loaded.error().message};
    return fromCheckpoint(std::move(*loaded));
  }
  std::vector<std::string> looked{"--model (not given)", "$OSPREY_GPT2 (not set)"};
  for (const fs::path& dir : huggingFaceCacheDirs()) {
    if (isCompleteModelDir(dir)) return fromCheckpoint(OSPREY_TRY(loadCheckpoint(dir)));
    looked.push_back(dir.string());
  }
  return initialised(kGpt2_124M, request.seed,
                     fmt::format("osprey: no GPT-2 checkpoint found (looked in {}); using GPT-2's "
                                 "initialisation with seed {} — the output is not meaningful text",
                                 fmt::join(looked, ", "), request.seed));
}

}  // namespace gpt2
