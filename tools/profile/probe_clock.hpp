// globalNs(): the GPU's %globaltimer, ns, for a probe that times inside its kernel (so that no
// launch is counted).
#pragma once

__device__ __forceinline__ unsigned long long globalNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
