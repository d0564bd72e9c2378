// Where one process stands in a data-parallel training run (train_ranks.hpp has the rest):
// settled by the command line (cli_train.cpp) before a handler is chosen, carried by TrainJob.
#pragma once

#include <string>

namespace gpt2::train {

// How the ranks' gradients become the step's gradient.
enum class GradientSum {
  Exact,      // the fixed-order fold of every micro-batch gradient: the same bits on any number of GPUs
  AllReduce,  // NCCL's all-reduce of each rank's sum: fastest, its order (and bits) vary with the count
};

// Where this process stands in the run (settled from the command line and the environment).
struct DataParallel {
  int rank = 0;
  int size = 1;             // 1: not data-parallel
  int localRank = 0;        // which GPU of this host
  GradientSum sum = GradientSum::Exact;
  std::string rendezvous;   // the file through which rank 0 hands NCCL's id to the others
  double timeoutSeconds = 600.0;  // longest wait for another rank (OSPREY_NCCL_TIMEOUT)
  std::string source;       // where the rank came from ("--gpus 2", "OMPI_COMM_WORLD_RANK")

  bool parallel() const { return size > 1; }
  bool leader() const { return rank == 0; }  // logs, validates and saves
};

}  // namespace gpt2::train
