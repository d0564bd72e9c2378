// The llm.c parameter layout and its Hugging Face names (see llmc_layout.hpp for the table).
#include "osprey/io/llmc_layout.hpp"

#include <array>
#include <charconv>

#include <fmt/format.h>

#include "osprey/io/input_file.hpp"

namespace osprey::io {
namespace {

// Limits well beyond any GPT-2 (the largest has C = 1600, L = 48), small enough that no size
// computed from them can overflow 64 bits.
constexpr Index kMaxContext = Index{1} << 20;
constexpr Index kMaxVocab = Index{1} << 24;
constexpr Index kMaxLayers = 4096;
constexpr Index kMaxChannels = Index{1} << 16;

// One of llm.c's 16 blocks. Shapes are per layer for per-layer blocks, in llm.c's orientation:
// {rows, cols} for matrices, {n} for vectors, with n, rows, cols multiples of C (or maxT, Vp).
enum class Extent { C, C3, C4, MaxT, Vp };

struct Block {
  std::string_view hfSuffix;  // the name after "h.{l}." (or the whole name for global blocks)
  bool perLayer;
  Extent rows;                // llm.c's first dimension
  bool matrix;                // rows x C (or C x 4C for fcprojw, see cols)
  Extent cols;                // second dimension when matrix
};

constexpr std::array<Block, 16> kBlocks{{
    {"wte.weight", false, Extent::Vp, true, Extent::C},
    {"wpe.weight", false, Extent::MaxT, true, Extent::C},
    {"ln_1.weight", true, Extent::C, false, Extent::C},
    {"ln_1.bias", true, Extent::C, false, Extent::C},
    {"attn.c_attn.weight", true, Extent::C3, true, Extent::C},
    {"attn.c_attn.bias", true, Extent::C3, false, Extent::C},
    {"attn.c_proj.weight", true, Extent::C, true, Extent::C},
    {"attn.c_proj.bias", true, Extent::C, false, Extent::C},
    {"ln_2.weight", true, Extent::C, false, Extent::C},
    {"ln_2.bias", true, Extent::C, false, Extent::C},
    {"mlp.c_fc.weight", true, Extent::C4, true, Extent::C},
    {"mlp.c_fc.bias", true, Extent::C4, false, Extent::C},
    {"mlp.c_proj.weight", true, Extent::C, true, Extent::C4},
    {"mlp.c_proj.bias", true, Extent::C, false, Extent::C},
    {"ln_f.weight", false, Extent::C, false, Extent::C},
    {"ln_f.bias", false, Extent::C, false, Extent::C},
}};

std::uint64_t extent(const LlmcConfig& c, Extent e) {
  switch (e) {
    case Extent::C: return static_cast<std::uint64_t>(c.C);
    case Extent::C3: return 3 * static_cast<std::uint64_t>(c.C);
    case Extent::C4: return 4 * static_cast<std::uint64_t>(c.C);
    case Extent::MaxT: return static_cast<std::uint64_t>(c.maxT);
    case Extent::Vp: return static_cast<std::uint64_t>(c.Vp);
  }
  return 0;
}

// Elements of one layer's slice (or of the whole block for global blocks).
std::uint64_t sliceElements(const LlmcConfig& c, const Block& b) {
  return b.matrix ? extent(c, b.rows) * extent(c, b.cols) : extent(c, b.rows);
}

std::uint64_t blockElements(const LlmcConfig& c, const Block& b) {
  return sliceElements(c, b) * (b.perLayer ? static_cast<std::uint64_t>(c.L) : 1);
}

// "h.{l}.{suffix}" -> l and suffix; l in canonical decimal (no sign, no leading zeros).
bool splitLayerName(std::string_view name, Index& layer, std::string_view& suffix) {
  if (name.substr(0, 2) != "h.") return false;
  const std::string_view rest = name.substr(2);
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const std::string_view digits = rest.substr(0, dot);
  if (digits.size() > 1 && digits[0] == '0') return false;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), layer);
  if (error != std::errc() || end != digits.data() + digits.size()) return false;
  suffix = rest.substr(dot + 1);
  return true;
}

}  // namespace

Result<void> checkLlmcConfig(const std::string& label, const LlmcConfig& c) {
  struct Limit {
    std::string_view what;
    Index value;
    Index max;
  };
  const std::array<Limit, 6> limits{{{"maxT (context length)", c.maxT, kMaxContext},
                                     {"V (vocabulary)", c.V, kMaxVocab},
                                     {"L (layers)", c.L, kMaxLayers},
                                     {"NH (heads)", c.NH, kMaxChannels},
                                     {"C (channels)", c.C, kMaxChannels},
                                     {"Vp (padded vocabulary)", c.Vp, 2 * kMaxVocab}}};
  for (const Limit& limit : limits) {
    if (limit.value < 1 || limit.value > limit.max) {
      return fileError(label, fmt::format("llm.c header gives {} = {}, outside 1..{}", limit.what, limit.value,
                                          limit.max));
    }
  }
  if (c.Vp < c.V) {
    return fileError(label, fmt::format("llm.c header gives padded vocabulary Vp = {} smaller than V = {}", c.Vp, c.V));
  }
  if (c.C % c.NH != 0) {
    return fileError(label, fmt::format("llm.c header gives C = {} channels, not divisible by NH = {} heads", c.C, c.NH));
  }
  return success();
}

std::optional<LlmcSlice> llmcSlice(const LlmcConfig& config, std::string_view name) {
  Index layer = -1;
  std::string_view suffix = name;
  const bool layered = splitLayerName(name, layer, suffix);
  if (layered && (layer < 0 || layer >= config.L)) return std::nullopt;

  std::uint64_t start = 0;
  for (const Block& b : kBlocks) {
    if (b.hfSuffix == suffix && b.perLayer == layered) {
      LlmcSlice slice;
      slice.transposed = b.matrix && b.perLayer;  // the Conv1D weights; wte and wpe are not
      slice.firstElement = start + (layered ? static_cast<std::uint64_t>(layer) * sliceElements(config, b) : 0);
      const auto rows = static_cast<Index>(extent(config, b.rows));
      const auto cols = static_cast<Index>(extent(config, b.cols));
      if (!b.matrix) {
        slice.hfShape = {rows};
      } else if (slice.transposed) {
        slice.hfShape = {cols, rows};
      } else if (b.rows == Extent::Vp) {
        slice.hfShape = {config.V, cols};  // padding rows dropped
      } else {
        slice.hfShape = {rows, cols};
      }
      slice.elementCount = 1;
      for (Index d : slice.hfShape) slice.elementCount *= static_cast<std::uint64_t>(d);
      return slice;
    }
    start += blockElements(config, b);
  }
  return std::nullopt;
}

std::vector<std::string> llmcTensorNames(const LlmcConfig& config) {
  std::vector<std::string> names{"wte.weight", "wpe.weight"};
  for (Index l = 0; l < config.L; ++l) {
    for (const Block& b : kBlocks) {
      if (b.perLayer) names.push_back(fmt::format("h.{}.{}", l, b.hfSuffix));
    }
  }
  names.push_back("ln_f.weight");
  names.push_back("ln_f.bias");
  return names;
}

std::uint64_t llmcParameterCount(const LlmcConfig& config) {
  std::uint64_t total = 0;
  for (const Block& b : kBlocks) total += blockElements(config, b);
  return total;
}

}  // namespace osprey::io
