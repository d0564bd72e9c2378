// The gpu handler on a device runtime that forgets `fold` is rejected where it is named: Gpu<D>
// requires a DeviceRuntime (include/osprey/gpu/handler.hpp), and the diagnostic names the concept.
// EXPECT: DeviceRuntime
#include "minimal_device.hpp"
#include "osprey/gpu/handler.hpp"

namespace osprey::compile_fail {

class ForgetsFold {
 public:
  OSPREY_MINIMAL_DEVICE_COMMON_MEMBERS(ForgetsFold);
  OSPREY_MINIMAL_DEVICE_INDEX_OF;
#if defined(OSPREY_POSITIVE_TWIN)
  OSPREY_MINIMAL_DEVICE_FOLD;
#endif
};

using OnForgetsFold = Gpu<ForgetsFold>;
OSPREY_ASSERT_HANDLER(OnForgetsFold, "gpu(forgets-fold)");

}  // namespace osprey::compile_fail
