// osprey-gpt2: the program boundary. The only place the cuda and opencl entry points are named:
// this file is linked with gpt2_core and (where they are built) gpt2_cuda and gpt2_opencl, which
// depend on gpt2_core, so referring to their instantiations from here avoids a cycle.
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
#if defined(OSPREY_GPT2_HAVE_OPENCL)
  entries.gpuOpenCl = &gpt2::runJobOnGpuOpenCl;
#endif
  std::ios::sync_with_stdio(false);
  return gpt2::runCli(std::vector<std::string>(argv, argv + argc), entries, std::cout, std::cerr);
}
