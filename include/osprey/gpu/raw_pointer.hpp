// Raw device pointers, both ways: a buffer's device address for code outside Osprey
// (rawDevicePtr), and a buffer over memory someone else allocated (bufFromRawDevicePtr). This is
// how Osprey shares memory without a copy: the Python module's NumPy buffer protocol and DLPack
// exchange (python/) go through these two functions and nothing else.
//
//   auto dev = OSPREY_TRY(HostDevice::open());
//   auto x   = OSPREY_TRY(toGpu(dev, std::array{1.0, 2.0, 3.0, 4.0}));
//   double* p = rawDevicePtr(x);                                   // x's elements, in place
//   auto y   = OSPREY_TRY(bufFromRawDevicePtr(dev, p, 4, x.memory()));   // the same memory
//
// Lifetime rules.
//
// rawDevicePtr(b):
//   * The address is valid while b, or any copy or part of it, lives. When the last is gone the
//     block goes back to the device's cache and is handed out to the next buffer of its size:
//     keep a copy of b (or its memory(), a shared handle) for as long as the address is used.
//   * A buffer made later() (buffer.hpp) has no memory until it is read; rawDevicePtr reads it.
//   * Osprey never writes into a buffer once made (every operation makes a new one), so the
//     elements stay as they are unless code outside Osprey writes through the address; it may,
//     and then every buffer sharing that memory (copies, parts) sees the change.
//   * On the cuda device, work is queued without waiting: the elements are final only once the
//     device has run what was queued before. Call the device's flush() (or read anything back)
//     before code on another stream or on the host reads through the address.
//
// bufFromRawDevicePtr(dev, ptr, n, owner):
//   * The memory stays its owner's: Osprey never releases it nor hands it to another buffer.
//   * It must hold n readable elements of T at ptr, aligned for T, on `dev` (the host's memory
//     for the host device; on cuda, device or managed memory of that very GPU, which the driver
//     is asked about: anything else is an Error, before any kernel could fault on it).
//   * It must stay valid, and unchanged unless the change is meant to be seen, while the buffer
//     or any copy or part of it lives. `owner` (may be null) is the way to make sure: the buffer
//     and all its copies and parts share it, and it is released with the last of them. Hold the
//     producer's handle there (a DLPack tensor's deleter, a Python object, a tensor).
//   * On cuda, the last copy going away waits for the work queued on the device's stream before
//     `owner` is released, so kernels still queued never read memory its owner has freed.
//   * Results computed from such a buffer are ordinary Osprey buffers and owe it nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "osprey/effect.hpp"
#include "osprey/gpu/buffer.hpp"
#include "osprey/result.hpp"

namespace osprey {

// Where b's elements live on its device (null for an empty buffer). See the lifetime rules above.
template <class D, class T>
T* rawDevicePtr(const GpuBuffer<D, T>& b) {
  return b.data();
}

// Whether `bytes` bytes at `p` are memory device `dev` can read: a device that can tell offers an
// overload for itself (gpu/cuda/raw_pointer.hpp asks the CUDA driver); the host reads any address
// of this process and takes the caller's word.
template <class D>
Result<void> checkRawAddress(D&, const void*, std::size_t) {
  return {};
}

// What must happen on `dev` before borrowed memory goes back to its owner: nothing on the host,
// where every operation has finished when it returns; cuda's overload waits for its stream.
template <class D>
void settleBeforeReturning(D&) {}

// A buffer of n elements of T at ptr on dev, which the buffer does not own. See the lifetime
// rules above; an address the device cannot read, a misaligned one or a negative length is an
// Error, never a buffer.
template <class T = Scalar, class D>
Result<GpuBuffer<D, T>> bufFromRawDevicePtr(const std::shared_ptr<D>& dev, T* ptr, Index n,
                                            std::shared_ptr<const void> owner = nullptr) {
  if (!dev) return Error{"bufFromRawDevicePtr: no device"};
  if (n < 0) return Error{fmt::format("bufFromRawDevicePtr: negative length {}", n)};
  if (n > 0 && ptr == nullptr)
    return Error{fmt::format("bufFromRawDevicePtr: a null address for {} elements", n)};
  if (reinterpret_cast<std::uintptr_t>(ptr) % alignof(T) != 0)
    return Error{fmt::format("bufFromRawDevicePtr: address {} is not aligned to the {} bytes of an element",
                             static_cast<const void*>(ptr), alignof(T))};
  if (n > 0) OSPREY_CHECK(checkRawAddress(*dev, ptr, static_cast<std::size_t>(n) * sizeof(T)));
  // The deleter is the owner's release: it never gives ptr to the device's cache.
  std::shared_ptr<T> memory(ptr, [dev, owner = std::move(owner)](T*) mutable {
    settleBeforeReturning(*dev);
    owner.reset();
  });
  return GpuBuffer<D, T>::borrowing(dev, std::move(memory), n);
}

}  // namespace osprey

#if defined(__CUDACC__)
#include "osprey/gpu/cuda/raw_pointer.hpp"
#endif
