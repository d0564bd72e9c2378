// Loading NCCL: dlopen of $OSPREY_NCCL_LIBRARY when set, else libnccl.so.2 on the loader's path.
#include <dlfcn.h>

#include <cstdlib>

#include <fmt/format.h>

#include "nccl_library.hpp"

namespace osprey::nccl_detail {
namespace {

template <class F>
bool resolve(void* handle, const char* name, F& into, std::string& missing) {
  into = reinterpret_cast<F>(dlsym(handle, name));
  if (into == nullptr) missing += missing.empty() ? name : fmt::format(", {}", name);
  return into != nullptr;
}

Result<NcclLibrary> load() {
  NcclLibrary lib;
  const char* chosen = std::getenv("OSPREY_NCCL_LIBRARY");
  lib.path = chosen != nullptr && *chosen != '\0' ? chosen : "libnccl.so.2";
  void* handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Error{fmt::format("cannot load NCCL ({}): {} — install NCCL, add its lib directory to "
                             "LD_LIBRARY_PATH, or point OSPREY_NCCL_LIBRARY at libnccl.so.2",
                             lib.path, why != nullptr ? why : "unknown dlopen error")};
  }
  std::string missing;
  resolve(handle, "ncclGetVersion", lib.getVersion, missing);
  resolve(handle, "ncclGetUniqueId", lib.getUniqueId, missing);
  resolve(handle, "ncclCommInitRankConfig", lib.commInitRankConfig, missing);
  resolve(handle, "ncclCommGetAsyncError", lib.commGetAsyncError, missing);
  resolve(handle, "ncclCommFinalize", lib.commFinalize, missing);
  resolve(handle, "ncclCommDestroy", lib.commDestroy, missing);
  resolve(handle, "ncclCommAbort", lib.commAbort, missing);
  resolve(handle, "ncclGetErrorString", lib.getErrorString, missing);
  resolve(handle, "ncclGetLastError", lib.getLastError, missing);
  resolve(handle, "ncclGroupStart", lib.groupStart, missing);
  resolve(handle, "ncclGroupEnd", lib.groupEnd, missing);
  resolve(handle, "ncclBroadcast", lib.broadcast, missing);
  resolve(handle, "ncclAllReduce", lib.allReduce, missing);
  if (!missing.empty())
    return Error{fmt::format("{} is not a usable NCCL: it lacks {} (NCCL 2.14 or later is needed)", lib.path,
                             missing)};
  if (lib.getVersion(&lib.version) != ncclSuccess) lib.version = 0;
  // The handle stays open for the life of the process: communicators may outlive any caller.
  return lib;
}

}  // namespace

Result<const NcclLibrary*> ncclLibrary() {
  static const Result<NcclLibrary> loaded = load();  // once per process (thread-safe static)
  if (!loaded.ok()) return loaded.error();
  return &*loaded;
}

}  // namespace osprey::nccl_detail
