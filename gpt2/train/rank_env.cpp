// Rank variables of the common launchers (train_rank_env.hpp).
#include "gpt2/train/rank_env.hpp"

#include <array>
#include <charconv>
#include <string_view>

#include <fmt/format.h>

namespace gpt2::train {
namespace {

struct Family {
  const char* rank;
  const char* size;
  const char* localRank;
};

constexpr std::array<Family, 5> kFamilies{{
    {"OSPREY_RANK", "OSPREY_WORLD_SIZE", "OSPREY_LOCAL_RANK"},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
}};

osprey::Result<int> number(const char* name, const char* text) {
  const std::string_view s(text);
  int value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value < 0)
    return osprey::Error{fmt::format("{}=\"{}\" is not a rank number (a whole number, 0 or more)", name, s)};
  return value;
}

}  // namespace

osprey::Result<std::optional<RankPlace>> rankFromEnvironment(const EnvironmentLookup& env) {
  for (const Family& f : kFamilies) {
    const char* rank = env(f.rank);
    if (rank == nullptr) continue;
    const char* size = env(f.size);
    if (size == nullptr)
      return osprey::Error{fmt::format("{} is set but {} is not: a launcher sets both", f.rank, f.size)};
    RankPlace p;
    p.source = f.rank;
    p.rank = OSPREY_TRY(number(f.rank, rank));
    p.size = OSPREY_TRY(number(f.size, size));
    if (p.size < 1) return osprey::Error{fmt::format("{}={} : a run has at least one rank", f.size, p.size)};
    if (p.rank >= p.size)
      return osprey::Error{fmt::format("{}={} is outside 0..{} ({}={})", f.rank, p.rank, p.size - 1, f.size, p.size)};
    const char* local = env(f.localRank);
    p.localRank = local != nullptr ? OSPREY_TRY(number(f.localRank, local)) : p.rank;
    return std::optional<RankPlace>(p);
  }
  return std::optional<RankPlace>();
}

}  // namespace gpt2::train
