// Device and DeviceBuffer (device.hpp) on one device runtime D, through the library's GPU surface
// (gpu/surface.hpp) and raw pointers (gpu/raw_pointer.hpp): instantiated for HostDevice by g++
// (host_device.cpp) and for CudaDevice by nvcc (cuda_device.cu).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "device.hpp"
#include "osprey/gpu/raw_pointer.hpp"
#include "osprey/gpu/surface.hpp"
#include "osprey/strict.hpp"

namespace osprey::python {

template <class D>
class DeviceOn;

template <class D>
class BufferOn final : public DeviceBuffer {
 public:
  BufferOn(std::shared_ptr<const DeviceOn<D>> device, GpuBuffer<D> buffer)
      : m_device(std::move(device)), m_buffer(std::move(buffer)) {}

  const Device& device() const override { return *m_device; }
  Index size() const override { return m_buffer.size(); }
  Scalar* address() const override { return rawDevicePtr(m_buffer); }
  std::shared_ptr<const void> memory() const override { return m_buffer.memory(); }
  Result<Scalar> get(Index i) const override {
    return strictly([&] { return gpuGet(m_buffer, i); });
  }
  Result<std::vector<Scalar>> toHost() const override {
    return strictly([&] { return fromGpu(m_buffer); });
  }
  Result<SharedBuffer> matMul(const DeviceBuffer& right, Index rows, Index inner, Index cols) const override {
    const auto* same = dynamic_cast<const BufferOn<D>*>(&right);
    if (!same || same->m_buffer.device() != m_buffer.device())
      return Error{fmt::format("gpuMatMul: the operands are on different devices ({} and {}): move one with "
                               "fromGpu and toGpu",
                               m_device->name(), right.device().name())};
    auto product = OSPREY_TRY(strictly([&] { return gpuMatMul(m_buffer, same->m_buffer, rows, inner, cols); }));
    return SharedBuffer(std::make_shared<BufferOn<D>>(m_device, std::move(product)));
  }
  Result<void> settle() const override {
    if constexpr (requires(D& d) { d.flush(); }) {
      return m_buffer.device() ? m_buffer.device()->flush() : Result<void>();
    } else {
      return {};
    }
  }

 private:
  std::shared_ptr<const DeviceOn<D>> m_device;
  GpuBuffer<D> m_buffer;
};

template <class D>
class DeviceOn final : public Device, public std::enable_shared_from_this<DeviceOn<D>> {
 public:
  DeviceOn(std::shared_ptr<D> runtime, DeviceKind kind, int ordinal)
      : m_runtime(std::move(runtime)), m_kind(kind), m_ordinal(ordinal) {}

  std::string name() const override { return gpuDevice(m_runtime); }
  DeviceKind kind() const override { return m_kind; }
  int ordinal() const override { return m_ordinal; }

  Result<SharedBuffer> lift(std::span<const Scalar> values) override {
    return wrap(strictly([&] { return toGpu(m_runtime, values); }));
  }
  Result<SharedBuffer> loadTensor(const std::string& path, const std::string& name) override {
    return wrap(strictly([&] { return gpuLoadTensor(m_runtime, path, name); }));
  }
  Result<SharedBuffer> borrow(Scalar* address, Index n, std::shared_ptr<const void> owner) override {
    return wrap(bufFromRawDevicePtr(m_runtime, address, n, std::move(owner)));
  }

 private:
  Result<SharedBuffer> wrap(Result<GpuBuffer<D>> made) {
    if (!made.ok()) return made.error();
    return SharedBuffer(std::make_shared<BufferOn<D>>(this->shared_from_this(), std::move(*made)));
  }

  std::shared_ptr<D> m_runtime;
  DeviceKind m_kind;
  int m_ordinal;
};

}  // namespace osprey::python
