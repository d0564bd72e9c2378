// Configure-time probe of the exact contract (exact_flags_check.cmake): compiled with the flags
// Osprey's sources get, it prints "unfused" when a*b + c is rounded twice, as DESIGN.md §4
// requires, and "fused" when the compiler contracted it into a fused multiply-add.
//
// a*b = 1 - 2^-60 exactly, which rounds to 1.0: unfused, a*b + c = 0; fused, -2^-60. The
// function is compiled for an FMA-capable x86 target so a compiler allowed to contract has the
// instruction to contract into; the CPU need not have FMA, since the answer is printed only when
// it does (or when the target is not x86, where the instruction is part of the architecture).
#include <cstdio>

#if defined(__x86_64__) || defined(__i386__)
#define OSPREY_PROBE_TARGET __attribute__((noinline, target("fma")))
#define OSPREY_PROBE_CAN_RUN __builtin_cpu_supports("fma")
#else
#define OSPREY_PROBE_TARGET __attribute__((noinline))
#define OSPREY_PROBE_CAN_RUN 1
#endif

volatile double gA = 1.0 + 0x1p-30, gB = 1.0 - 0x1p-30, gC = -1.0;

OSPREY_PROBE_TARGET double mulAdd(double a, double b, double c) { return a * b + c; }

__attribute__((noinline)) double mulAddPlain(double a, double b, double c) { return a * b + c; }

int main() {
  const double plain = mulAddPlain(gA, gB, gC);
  const double onFmaTarget = OSPREY_PROBE_CAN_RUN ? mulAdd(gA, gB, gC) : 0.0;
  std::puts(plain == 0.0 && onFmaTarget == 0.0 ? "unfused" : "fused");
  return 0;
}
