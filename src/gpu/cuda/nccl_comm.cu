// NcclComm (include/osprey/gpu/cuda/nccl.hpp): a non-blocking NCCL communicator whose every wait has a
// deadline, and the unique-id exchange through a file.
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "nccl_library.hpp"
#include "osprey/gpu/cuda/nccl.hpp"

namespace osprey {

using nccl_detail::NcclLibrary;

struct NcclComm::State {
  const NcclLibrary* lib = nullptr;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  bool aborted = false;
  Scalar* cell = nullptr;  // one double of device memory for allReduceMax, kept for the life of the
                           // communicator (it runs twice a training step; cudaFree syncs the device)

  // The stream and the cell go with the state: on every early return from open() and after
  // ~NcclComm has finalized or aborted the communicator (with the device still selected).
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (cell != nullptr) cudaFree(cell);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string describe(const NcclLibrary& lib, ncclComm_t comm, ncclResult_t r) {
  std::string text = fmt::format("{} ({})", lib.getErrorString(r), static_cast<int>(r));
  const char* last = lib.getLastError(comm);
  if (last != nullptr && *last != '\0') text += fmt::format(": {}", last);
  return text;
}

// Waits until the communicator has no operation in progress (non-blocking mode returns
// ncclInProgress from calls that are still running), or the deadline passes.
Result<void> settle(NcclComm::State& s, Clock::time_point start, double timeout, const std::string& what) {
  for (;;) {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = s.lib->commGetAsyncError(s.comm, &async);
    if (r != ncclSuccess) return Error{fmt::format("NCCL {}: {}", what, describe(*s.lib, s.comm, r))};
    if (async == ncclSuccess) return {};
    if (async != ncclInProgress) return Error{fmt::format("NCCL {}: {}", what, describe(*s.lib, s.comm, async))};
    if (secondsSince(start) > timeout)
      return Error{fmt::format("NCCL {}: not done after {:g} s (OSPREY_NCCL_TIMEOUT): another rank has "
                               "probably died or stalled", what, timeout)};
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Waits for the stream's work (the collectives just enqueued), watching NCCL's asynchronous
// error and the deadline.
Result<void> drain(NcclComm::State& s, Clock::time_point start, double timeout, const std::string& what) {
  OSPREY_CHECK(settle(s, start, timeout, what));
  for (;;) {
    const cudaError_t q = cudaStreamQuery(s.stream);
    if (q == cudaSuccess) return {};
    if (q != cudaErrorNotReady)
      return Error{fmt::format("NCCL {}: CUDA error {} ({})", what, cudaGetErrorString(q), cudaGetErrorName(q))};
    OSPREY_CHECK(settle(s, start, timeout, what));
    if (secondsSince(start) > timeout)
      return Error{fmt::format("NCCL {}: not done after {:g} s (OSPREY_NCCL_TIMEOUT): another rank has "
                               "probably died or stalled", what, timeout)};
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Result<void> cudaChecked(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return {};
  (void)cudaGetLastError();
  return Error{fmt::format("{}: CUDA error {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e))};
}

}  // namespace

Result<NcclUniqueId> NcclComm::newId() {
  const NcclLibrary* lib = OSPREY_TRY(nccl_detail::ncclLibrary());
  ncclUniqueId raw{};
  const ncclResult_t r = lib->getUniqueId(&raw);
  if (r != ncclSuccess) return Error{fmt::format("ncclGetUniqueId: {}", lib->getErrorString(r))};
  NcclUniqueId id;
  static_assert(sizeof(raw.internal) == sizeof(id.bytes));
  std::copy(std::begin(raw.internal), std::end(raw.internal), id.bytes.begin());
  return id;
}

Result<NcclUniqueId> NcclComm::exchangeId(int rank, const std::filesystem::path& file, double timeoutSeconds) {
  if (rank == 0) {
    std::error_code ec;
    if (std::filesystem::exists(file, ec))
      return Error{fmt::format("the rendezvous file {} already exists (left by an earlier run?): remove it, or "
                               "give each run its own", file.string())};
    const NcclUniqueId id = OSPREY_TRY(newId());
    // Written beside the target and renamed, so a waiting rank never reads half an id.
    const std::filesystem::path partial = file.string() + fmt::format(".partial.{}", ::getpid());
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      out.write(id.bytes.data(), static_cast<std::streamsize>(id.bytes.size()));
      out.flush();
      if (!out) return Error{fmt::format("cannot write the rendezvous file {}", partial.string())};
    }
    std::filesystem::rename(partial, file, ec);
    if (ec) return Error{fmt::format("cannot create the rendezvous file {}: {}", file.string(), ec.message())};
    return id;
  }
  const auto start = Clock::now();
  for (;;) {
    std::ifstream in(file, std::ios::binary);
    if (in) {
      NcclUniqueId id;
      in.read(id.bytes.data(), static_cast<std::streamsize>(id.bytes.size()));
      if (in.gcount() == static_cast<std::streamsize>(id.bytes.size())) return id;
      return Error{fmt::format("the rendezvous file {} is truncated ({} of {} bytes)", file.string(), in.gcount(),
                               id.bytes.size())};
    }
    if (secondsSince(start) > timeoutSeconds)
      return Error{fmt::format("rank {}: rank 0 did not create the rendezvous file {} within {:g} s", rank,
                               file.string(), timeoutSeconds)};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<std::unique_ptr<NcclComm>> NcclComm::open(int rank, int size, const NcclUniqueId& id, int cudaDevice,
                                                 double timeoutSeconds) {
  if (size < 1 || rank < 0 || rank >= size)
    return Error{fmt::format("NCCL: rank {} is not one of 0..{}", rank, size - 1)};
  // Multicast over NVLink can take a shared host's GPUs out of service; never ask for it unless
  // the environment explicitly does.
  ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  auto state = std::make_unique<State>();
  state->lib = OSPREY_TRY(nccl_detail::ncclLibrary());
  state->device = cudaDevice;
  OSPREY_CHECK(cudaChecked(cudaSetDevice(cudaDevice), fmt::format("NCCL rank {}: selecting CUDA device {}", rank,
                                                                  cudaDevice)));
  OSPREY_CHECK(cudaChecked(cudaStreamCreate(&state->stream), fmt::format("NCCL rank {}: creating a stream", rank)));
  OSPREY_CHECK(cudaChecked(cudaMalloc(&state->cell, sizeof(Scalar)), fmt::format("NCCL rank {}: one double", rank)));
  ncclUniqueId raw{};
  std::copy(id.bytes.begin(), id.bytes.end(), std::begin(raw.internal));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const auto start = Clock::now();
  const ncclResult_t r = state->lib->commInitRankConfig(&state->comm, size, raw, rank, &config);
  const std::string what = fmt::format("joining the communicator as rank {} of {}", rank, size);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (state->comm != nullptr) state->lib->commAbort(state->comm);
    return Error{fmt::format("NCCL {}: {}", what, state->lib->getErrorString(r))};
  }
  auto joined = settle(*state, start, timeoutSeconds, what);
  if (!joined.ok()) {
    state->lib->commAbort(state->comm);
    return joined.error();
  }
  return std::unique_ptr<NcclComm>(new NcclComm(rank, size, timeoutSeconds, std::move(state)));
}

NcclComm::NcclComm(int rank, int size, double timeoutSeconds, std::unique_ptr<State> state)
    : m_rank(rank), m_size(size), m_timeoutSeconds(timeoutSeconds), m_state(std::move(state)) {}

NcclComm::~NcclComm() {
  if (!m_state) return;
  State& s = *m_state;
  cudaSetDevice(s.device);
  if (!s.aborted) {
    // Finalize flushes outstanding work; if that does not settle in time, abort rather than hang.
    const ncclResult_t r = s.lib->commFinalize(s.comm);
    const bool finalized = (r == ncclSuccess || r == ncclInProgress) &&
                           settle(s, Clock::now(), std::min(m_timeoutSeconds, 30.0), "finalizing").ok();
    if (finalized)
      s.lib->commDestroy(s.comm);
    else
      s.lib->commAbort(s.comm);
  }
}

namespace {

// Enqueues `issue(i)` for every buffer in one NCCL group, then waits for all of it. On any
// failure the communicator is aborted: a collective that failed on one rank can leave the others
// waiting, and an aborted communicator makes them fail (or time out) instead.
template <class Issue>
Result<void> groupAndWait(NcclComm::State& s, std::size_t count, double timeout, const std::string& what,
                          Issue issue) {
  auto fail = [&](Error e) -> Result<void> {
    s.lib->commAbort(s.comm);
    s.aborted = true;
    return e;
  };
  if (s.aborted) return Error{fmt::format("NCCL {}: the communicator was aborted after an earlier error", what)};
  OSPREY_CHECK(cudaChecked(cudaSetDevice(s.device), fmt::format("NCCL {}", what)));
  // The buffers were written by kernels on other streams: they must be complete before NCCL reads.
  if (auto synced = cudaChecked(cudaDeviceSynchronize(), fmt::format("NCCL {}: finishing earlier work", what));
      !synced.ok())
    return fail(synced.error());
  const auto start = Clock::now();
  ncclResult_t r = s.lib->groupStart();
  for (std::size_t i = 0; i < count && (r == ncclSuccess || r == ncclInProgress); ++i) r = issue(i);
  const ncclResult_t ended = s.lib->groupEnd();
  if (r != ncclSuccess && r != ncclInProgress) return fail(Error{fmt::format("NCCL {}: {}", what, describe(*s.lib, s.comm, r))});
  if (ended != ncclSuccess && ended != ncclInProgress)
    return fail(Error{fmt::format("NCCL {}: {}", what, describe(*s.lib, s.comm, ended))});
  auto done = drain(s, start, timeout, what);
  if (!done.ok()) return fail(done.error());
  return {};
}

Result<void> checkShapes(std::span<Scalar* const> buffers, std::span<const Index> counts, const std::string& what) {
  if (buffers.size() != counts.size())
    return Error{fmt::format("NCCL {}: {} buffers but {} counts", what, buffers.size(), counts.size())};
  for (std::size_t i = 0; i < counts.size(); ++i)
    if (counts[i] < 0) return Error{fmt::format("NCCL {}: buffer {} has a negative size {}", what, i, counts[i])};
  return {};
}

}  // namespace

Result<void> NcclComm::broadcast(std::span<Scalar* const> buffers, std::span<const Index> counts, int root,
                                 const std::string& what) {
  OSPREY_CHECK(checkShapes(buffers, counts, what));
  if (root < 0 || root >= m_size)
    return Error{fmt::format("NCCL {}: root {} is not one of 0..{}", what, root, m_size - 1)};
  State& s = *m_state;
  return groupAndWait(s, buffers.size(), m_timeoutSeconds, what, [&](std::size_t i) {
    return s.lib->broadcast(buffers[i], buffers[i], static_cast<size_t>(counts[i]), ncclFloat64, root, s.comm,
                            s.stream);
  });
}

Result<void> NcclComm::allReduceSum(std::span<Scalar* const> buffers, std::span<const Index> counts,
                                    const std::string& what) {
  OSPREY_CHECK(checkShapes(buffers, counts, what));
  State& s = *m_state;
  return groupAndWait(s, buffers.size(), m_timeoutSeconds, what, [&](std::size_t i) {
    return s.lib->allReduce(buffers[i], buffers[i], static_cast<size_t>(counts[i]), ncclFloat64, ncclSum, s.comm,
                            s.stream);
  });
}

Result<Scalar> NcclComm::allReduceMax(Scalar x, const std::string& what) {
  State& s = *m_state;
  OSPREY_CHECK(cudaChecked(cudaSetDevice(s.device), fmt::format("NCCL {}", what)));
  OSPREY_CHECK(cudaChecked(cudaMemcpy(s.cell, &x, sizeof(Scalar), cudaMemcpyHostToDevice), fmt::format("NCCL {}", what)));
  OSPREY_CHECK(groupAndWait(s, 1, m_timeoutSeconds, what, [&](std::size_t) {
    return s.lib->allReduce(s.cell, s.cell, 1, ncclFloat64, ncclMax, s.comm, s.stream);
  }));
  Scalar out = 0.0;
  OSPREY_CHECK(cudaChecked(cudaMemcpy(&out, s.cell, sizeof(Scalar), cudaMemcpyDeviceToHost), fmt::format("NCCL {}", what)));
  return out;
}

std::string NcclComm::libraryDescription() {
  auto lib = nccl_detail::ncclLibrary();
  if (!lib.ok()) return lib.error().message;
  const int v = (*lib)->version;
  return fmt::format("{}, NCCL {}.{}.{}", (*lib)->path, v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace osprey
