// The cuda device's record of its launches: each kernel-launching unit's fault slot (registered at
// the unit's first launch), the number of every launch that can fault, and the names of the last
// kRecords of them. Launches are queued without waiting (osprey/gpu/cuda/device.hpp), so a fault is
// found at a later check; the ledger lets that check name the launch that made it.
#pragma once

#if !defined(__CUDACC__)
#error "osprey/gpu/cuda/launch_ledger.hpp is compiled by nvcc only (a .cu file)"
#endif

#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "osprey/config.hpp"
#include "osprey/gpu/cuda/check.hpp"
#include "osprey/gpu/cuda/launch_faults.hpp"
#include "osprey/result.hpp"
#include "osprey/strict.hpp"

namespace osprey::cuda_detail {

class LaunchLedger {
 public:
  LaunchLedger() : m_records(kRecords) {}
  LaunchLedger(const LaunchLedger&) = delete;
  LaunchLedger& operator=(const LaunchLedger&) = delete;
  // Best effort, as the device's own teardown: the driver reclaims pinned memory with the process.
  ~LaunchLedger() {
    for (const Unit& u : m_units) (void)cudaFreeHost(u.readback);
  }

  // How many launches that can fault have been queued so far (each has a number 1, 2, ...).
  unsigned long long launches() const {
    std::lock_guard lock(m_lock);
    return m_count;
  }

  // Registers the launching unit's fault slot on the unit's first launch, records the kernel's
  // label, and returns the launch's number (which the kernel stamps next to a fault it records).
  Result<unsigned long long> begin(const void* unit, Result<UnitAddresses> (*addresses)(), LabelFunction label,
                                   Index n) {
    std::lock_guard lock(m_lock);
    bool known = false;
    for (const Unit& u : m_units) known = known || u.key == unit;
    if (!known) {
      const UnitAddresses at = OSPREY_TRY(addresses());
      void* readback = nullptr;
      OSPREY_CUDA_CHECK(cudaMallocHost(&readback, sizeof(SlotReadback)), "allocating pinned memory for a fault slot");
      m_units.push_back(Unit{unit, at, static_cast<SlotReadback*>(readback)});
    }
    const unsigned long long number = ++m_count;
    m_records[number % kRecords] = Record{number, label, n};
    return number;
  }

  // Waits for `stream` and returns the first fault recorded since the last check, if any, naming
  // its launch; then clears every slot, so the device is usable again. `what` is the operation
  // that needed the wait; with `hostWords` (each launch checked as it is made) the error is the
  // fault's words alone, as the launching operation would have said them. Copies the caller
  // queued to pinned memory are complete after.
  Result<void> settle(cudaStream_t stream, std::string_view what, bool hostWords) {
    std::lock_guard lock(m_lock);
    for (const Unit& u : m_units)
      OSPREY_CUDA_CHECK(cudaMemcpyAsync(&u.readback->fault, u.device.fault, sizeof(DeviceFault), cudaMemcpyDeviceToHost,
                                        stream),
                        fmt::format("reading a fault slot before {}", what));
    const cudaError_t ran = cudaStreamSynchronize(stream);
    if (ran != cudaSuccess)
      return cuda::failure(ran, "cudaStreamSynchronize(stream)", __FILE__, __LINE__,
                           fmt::format("waiting for the queued kernels before {} (the last launched: {})", what,
                                       describe(m_count)));
    bool faulted = false;
    for (const Unit& u : m_units) faulted = faulted || u.readback->fault.kind != static_cast<int>(FaultKind::None);
    if (!faulted) return {};

    // Which launch faulted first: the smallest stamp among the faulting units.
    const Unit* first = nullptr;
    unsigned long long firstLaunch = 0;
    for (const Unit& u : m_units) {
      if (u.readback->fault.kind == static_cast<int>(FaultKind::None)) continue;
      OSPREY_CUDA_CHECK(cudaMemcpy(&u.readback->launch, u.device.launch, sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost),
                        "reading a fault-launch stamp");
      if (!first || u.readback->launch < firstLaunch) {
        first = &u;
        firstLaunch = u.readback->launch;
      }
      OSPREY_CUDA_CHECK(cudaMemset(u.device.fault, 0, sizeof(DeviceFault)), "clearing a fault slot");
      OSPREY_CUDA_CHECK(cudaMemset(u.device.launch, 0, sizeof(unsigned long long)), "clearing a fault-launch stamp");
    }
    const DeviceFault& f = first->readback->fault;
    std::string words = describeFault(static_cast<FaultKind>(f.kind), f.a, f.b);
    if (hostWords) return Error{std::move(words)};
    return Error{fmt::format("{} (in {}; found at {})", words, describe(firstLaunch), what)};
  }

 private:
  struct Unit {
    const void* key;  // the unit's `thisUnit`
    UnitAddresses device;
    SlotReadback* readback;  // pinned
  };
  struct Record {
    unsigned long long number = 0;
    LabelFunction label = nullptr;
    Index n = 0;
  };
  static constexpr unsigned long long kRecords = 8192;

  // "forEach<…> over 10000 elements, launch 3 on this device" (m_lock held).
  std::string describe(unsigned long long number) const {
    if (number == 0) return "no kernel";
    const Record& r = m_records[number % kRecords];
    if (r.number != number || !r.label)
      return fmt::format("launch {} on this device, older than the last {} whose names are kept", number, kRecords);
    return fmt::format("{} over {} elements, launch {} on this device", r.label(), r.n, number);
  }

  mutable std::mutex m_lock;  // everything below
  std::vector<Unit> m_units;
  std::vector<Record> m_records;  // ring: launch number % kRecords
  unsigned long long m_count = 0;
};

}  // namespace osprey::cuda_detail
