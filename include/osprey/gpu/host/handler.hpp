// The gpu handler on the host device.
#pragma once

#include "osprey/gpu/handler.hpp"
#include "osprey/gpu/host/device.hpp"

namespace osprey {
using GpuHost = Gpu<HostDevice>;
OSPREY_ASSERT_HANDLER(GpuHost, "gpu(host)");
}  // namespace osprey
