// The NCCL entry points Osprey calls, resolved from the shared library at run time (see
// include/osprey/gpu/cuda/nccl.hpp for why NCCL is loaded rather than linked). Internal to
// src/gpu/nccl_*.cu.
#pragma once

#include <nccl.h>

#include <string>

#include "osprey/result.hpp"

namespace osprey::nccl_detail {

struct NcclLibrary {
  std::string path;  // what dlopen was given
  int version = 0;   // ncclGetVersion's code (22803 for 2.28.3)
  ncclResult_t (*getVersion)(int*) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*commInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*commFinalize)(ncclComm_t) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  const char* (*getErrorString)(ncclResult_t) = nullptr;
  const char* (*getLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
};

// The library, loaded once per process; an Error naming what was tried when it cannot be.
Result<const NcclLibrary*> ncclLibrary();

}  // namespace osprey::nccl_detail
