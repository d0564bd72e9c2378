// A device runtime that forgets `indexOf` is not a DeviceRuntime, and OSPREY_ASSERT_DEVICE, placed
// after every device, says which member is missing (include/osprey/gpu/device_runtime.hpp).
// EXPECT: forgets-indexOf is no DeviceRuntime: indexOf(view, x) missing or mistyped
#include "minimal_device.hpp"

namespace osprey::compile_fail {

class ForgetsIndexOf {
 public:
  OSPREY_MINIMAL_DEVICE_COMMON_MEMBERS(ForgetsIndexOf);
  OSPREY_MINIMAL_DEVICE_FOLD;
#if defined(OSPREY_POSITIVE_TWIN)
  OSPREY_MINIMAL_DEVICE_INDEX_OF;
#endif
};

OSPREY_ASSERT_DEVICE(ForgetsIndexOf, "forgets-indexOf");

}  // namespace osprey::compile_fail
