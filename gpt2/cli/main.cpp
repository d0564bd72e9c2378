// osprey-gpt2: the program boundary. The only place the cuda entry point is named: this file is
// linked with both gpt2_core and (when nvcc built it) gpt2_cuda, which depends on gpt2_core, so
// referring to the cuda instantiation from here avoids a cycle between the two libraries.
#include <iostream>
#include <string>
#include <vector>

#include "gpt2/cli/cli.hpp"
#include "gpt2/cli/run.hpp"

int main(int argc, char** argv) {
  gpt2::HandlerEntries entries = gpt2::hostEntries();
#if defined(OSPREY_GPT2_HAVE_CUDA)
  entries.gpuCuda = &gpt2::runJobOnGpuCuda;
  entries.fast = &gpt2::runJobOnFast;
#endif
  std::ios::sync_with_stdio(false);
  return gpt2::runCli(std::vector<std::string>(argv, argv + argc), entries, std::cout, std::cerr);
}
