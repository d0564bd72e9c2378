// OpenCL C from a traced kernel (graph.hpp): the text depends only on what the kernel computes,
// never on the numbers it captured or the buffers it reads, which are the kernel's arguments in
// this order:
//
//   __global double* out, long outOffset, long n, __global long* fault,
//   then per view s:      __global const double* v<s>, long o<s>     (o: the view's first element)
//   then per constant s:  double k<s> or long k<s>
//
// so a device compiles each distinct text once and launches it with each call's arguments.
// Every program starts with `#pragma OPENCL FP_CONTRACT OFF` and needs cl_khr_fp64: the
// operations are the ones the kernel wrote, each rounded once, as on the host.
#pragma once

#include <string>

#include "osprey/trace/graph.hpp"

namespace osprey::trace {

// EachIndex: out[outOffset + i] = value for every work item i < n.
// Single: one work item computes out[outOffset] = value (a fold in element order).
enum class Shape { EachIndex, Single };

// The name every emitted kernel has in its program.
inline constexpr const char* kKernelName = "osprey_kernel";

// Where the constants travel: one kernel argument each (the list above), or, for a kernel with
// more than the device's argument space holds, one buffer of their bits (`__global const ulong*
// constants`, after the views) that the kernel reads at its start.
enum class Constants { Arguments, Buffer };

// The program for `graph` whose output is node `result`: the prelude, then openClKernel's text.
std::string openClSource(const Graph& graph, int result, Shape shape, Constants constants = Constants::Arguments);
// The kernel alone, without the prelude every program shares: what tells two programs apart (a
// device's cache key, which then need not copy and hash the prelude at every launch).
std::string openClKernel(const Graph& graph, int result, Shape shape, Constants constants = Constants::Arguments);

// What every program starts with: the pragmas, and the checked index arithmetic whose faults are
// recorded in the fault slot (kind, then the two operands) as osprey::Int's are on the host.
const std::string& openClPrelude();

}  // namespace osprey::trace
