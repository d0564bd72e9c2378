// NcclComm: one rank's NCCL communicator, for data-parallel runs on the cuda device (one process
// per GPU). NCCL is the transport; nothing here moves bytes itself.
//
// NCCL is loaded when the first communicator is asked for (dlopen of $OSPREY_NCCL_LIBRARY, else
// libnccl.so.2), not linked: a program that never runs on several GPUs starts and works on
// machines without NCCL, and one that does gets an Error naming the library it could not load.
//
// No call here can hang: the communicator is non-blocking (NCCL's `blocking = 0` config), and
// every wait (joining the communicator, each collective) polls NCCL's asynchronous error and a
// deadline. A rank that died, a NCCL error or a timeout aborts the communicator and becomes an
// Error naming the operation, so every surviving rank ends with a message instead of waiting
// forever.
//
// Declared for every compiler (the header names no CUDA or NCCL type); defined in
// src/gpu/cuda/nccl_comm.cu, so it exists only in builds with nvcc. Keep NVLink multicast off on
// shared machines (NCCL_NVLS_ENABLE=0); open() sets it when the environment does not say.
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "osprey/config.hpp"
#include "osprey/result.hpp"

namespace osprey {

// ncclUniqueId's bytes: what every rank must share before the communicator can be built.
struct NcclUniqueId {
  std::array<char, 128> bytes{};
};

class NcclComm {
 public:
  // A fresh id (NCCL's bootstrap address), from rank 0.
  static Result<NcclUniqueId> newId();

  // The id through a file every rank can see: rank 0 creates it (and refuses a file left by an
  // earlier run), the others wait for it until the deadline.
  static Result<NcclUniqueId> exchangeId(int rank, const std::filesystem::path& file, double timeoutSeconds);

  // Joins the communicator of `size` ranks as `rank`, on CUDA device `cudaDevice`.
  static Result<std::unique_ptr<NcclComm>> open(int rank, int size, const NcclUniqueId& id, int cudaDevice,
                                                double timeoutSeconds);

  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return m_rank; }
  int size() const { return m_size; }

  // Every buffer (device memory, counts[i] doubles) becomes root's, on every rank; one NCCL
  // group, waited for. `what` names the data in errors ("gradients of micro-batch 3").
  Result<void> broadcast(std::span<Scalar* const> buffers, std::span<const Index> counts, int root,
                         const std::string& what);

  // Every buffer becomes the sum over ranks (NCCL's reduction order, not fixed: fast mode only).
  Result<void> allReduceSum(std::span<Scalar* const> buffers, std::span<const Index> counts,
                            const std::string& what);

  // The largest of every rank's x (a device round trip; used to agree on stopping).
  Result<Scalar> allReduceMax(Scalar x, const std::string& what);

  // Which NCCL library was loaded and its version ("libnccl.so.2, NCCL 2.28.3").
  static std::string libraryDescription();

  struct State;  // the NCCL and CUDA handles (defined in src/gpu/cuda/nccl_comm.cu only)

 private:
  NcclComm(int rank, int size, double timeoutSeconds, std::unique_ptr<State> state);

  int m_rank = 0;
  int m_size = 1;
  double m_timeoutSeconds = 600.0;
  std::unique_ptr<State> m_state;
};

}  // namespace osprey
