// osprey-differential: writes dump.hpp's raw-bits dump of the tiny GPT-2 on one handler.
//
//   osprey-differential --handlers                 the handlers this build links, one per line
//   osprey-differential --handler lists|gpu-host [--expand "<quantity> <name>"]
//
// Built by every configuration of scripts/differential.sh: the host compilers at each
// optimisation level, the sanitizer build, nvcc (driver_nvcc.cu compiles this same file), and
// wasm32 under node, which links no OpenMP and so only the lists handler
// (OSPREY_DIFFERENTIAL_LISTS_ONLY). It needs the core library and the model headers only: no
// tokenizer, no CLI, no checkpoint files.
#include <cstdio>
#include <cstring>
#include <string>

#include "differential/dump.hpp"
#include "osprey/lists/lists.hpp"
#if !defined(OSPREY_DIFFERENTIAL_LISTS_ONLY)
#include "osprey/gpu/host/handler.hpp"
#endif

namespace {

osprey::Result<void> run(const std::string& handler, differential::Sink& sink) {
  const differential::Inputs inputs;
  if (handler == "lists") {
    osprey::Lists h;
    return osprey::strictly([&] { return differential::dumpAll(h, inputs, sink); });
  }
#if !defined(OSPREY_DIFFERENTIAL_LISTS_ONLY)
  if (handler == "gpu-host") {
    auto device = OSPREY_TRY(osprey::HostDevice::open());
    osprey::GpuHost h(device);
    return osprey::strictly([&] { return differential::dumpAll(h, inputs, sink); });
  }
#endif
  return osprey::Error{"unknown handler `" + handler + "`: see --handlers"};
}

int usage() {
  std::fputs("usage: osprey-differential --handlers\n"
             "       osprey-differential --handler lists|gpu-host [--expand \"<quantity> <name>\"]\n",
             stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string handler;
  differential::Sink sink;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--handlers") {
#if defined(OSPREY_DIFFERENTIAL_LISTS_ONLY)
      std::fputs("lists\n", stdout);
#else
      std::fputs("lists\ngpu-host\n", stdout);
#endif
      return 0;
    }
    if (arg == "--handler" && i + 1 < argc) {
      handler = argv[++i];
    } else if (arg == "--expand" && i + 1 < argc) {
      sink.expand = argv[++i];
    } else {
      return usage();
    }
  }
  if (handler.empty()) return usage();

  const auto result = run(handler, sink);
  if (!result.ok()) {
    std::fprintf(stderr, "osprey-differential: error: %s\n", result.error().message.c_str());
    return 1;
  }
  if (std::fwrite(sink.text.data(), 1, sink.text.size(), stdout) != sink.text.size() || std::fflush(stdout) != 0) {
    std::fputs("osprey-differential: error: writing the dump failed\n", stderr);
    return 1;
  }
  return 0;
}
