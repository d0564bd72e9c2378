// NcclComm in a build that found no nccl.h (CMakeLists.txt picks this file or nccl_comm.cu):
// every way in is an Error saying what the build lacked, never a single-GPU run in disguise.
#include <fmt/format.h>

#include "osprey/gpu/cuda/nccl.hpp"

namespace osprey {

namespace {
Error absent() {
  return Error{"this build of Osprey found no nccl.h, so it cannot run on several GPUs: install NCCL's "
               "development files (or set OSPREY_NCCL_INCLUDE to the directory holding nccl.h) and rebuild"};
}
}  // namespace

struct NcclComm::State {};

Result<NcclUniqueId> NcclComm::newId() { return absent(); }
Result<NcclUniqueId> NcclComm::exchangeId(int, const std::filesystem::path&, double) { return absent(); }
Result<std::unique_ptr<NcclComm>> NcclComm::open(int, int, const NcclUniqueId&, int, double) { return absent(); }
NcclComm::~NcclComm() = default;
Result<void> NcclComm::broadcast(std::span<Scalar* const>, std::span<const Index>, int, const std::string&) {
  return absent();
}
Result<void> NcclComm::allReduceSum(std::span<Scalar* const>, std::span<const Index>, const std::string&) {
  return absent();
}
Result<Scalar> NcclComm::allReduceMax(Scalar, const std::string&) { return absent(); }
std::string NcclComm::libraryDescription() { return absent().message; }

}  // namespace osprey
