// Which rank this process is, from the variables a launcher sets. Read in this order, the first
// family present wins:
//
//   OSPREY_RANK, OSPREY_WORLD_SIZE, OSPREY_LOCAL_RANK          osprey-gpt2 train --gpus N
//   RANK, WORLD_SIZE, LOCAL_RANK                               torchrun and its imitators
//   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK                   Open MPI's mpirun
//   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID                        MPICH / Intel MPI (Hydra)
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID                  srun
//
// A family needs its rank and size; a missing local rank means "one host": the local rank is
// the rank. Malformed values (not a number, rank outside 0..size-1) are errors naming the
// variable.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "osprey/result.hpp"

namespace gpt2::train {

struct RankPlace {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  std::string source;  // the rank variable's name
};

// getenv, or a map in tests.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// nullopt when no family is set (a plain, single-process run).
osprey::Result<std::optional<RankPlace>> rankFromEnvironment(const EnvironmentLookup& env);

}  // namespace gpt2::train
