#include "osprey/gpu/opencl/device.hpp"

#include "choice.hpp"
#include "cl_errors.hpp"
#include "fixed_kernels.hpp"
#include "matmul_kernels.hpp"
#include "matmul_plan.hpp"

#include <CL/cl.h>
#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "osprey/strict.hpp"

namespace osprey {

using opencl_detail::clError;
using opencl_detail::errorName;
using opencl_detail::kFixedKernels;
using opencl_detail::kMatMulKernels;

namespace opencl_detail {
std::string kernelName(const std::type_info& type) {
  int status = 0;
  char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && readable ? readable : type.name();
  std::free(readable);
  return out;
}
}  // namespace opencl_detail

namespace {
// Compiler options: none that relax IEEE arithmetic (no -cl-fast-relaxed-math, -cl-mad-enable,
// -cl-unsafe-math-optimizations, -cl-denorms-are-zero).
constexpr const char* kBuildOptions = "";
}  // namespace

struct OpenClDevice::State {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::string name;
  std::size_t maxArgumentBytes = 1024;  // CL_DEVICE_MAX_PARAMETER_SIZE (1024: the least OpenCL allows)

  cl_mem fault = nullptr;  // kind, a, b
  cl_mem empty = nullptr;  // stands for an empty view's memory
  cl_program fixed = nullptr;
  cl_kernel indexOf = nullptr;
  std::array<cl_kernel, opencl_detail::kMatMulKernelCount> matmul{};  // by opencl_detail::slotOf(MatMulKernel)
  opencl_detail::MatMulLimits matmulLimits;

  struct Compiled {
    cl_program program;
    cl_kernel kernel;
  };
  std::unordered_map<std::string, Compiled> programs;

  // Device memory is handed out as addresses in a range no host memory uses, one block per
  // allocation (with a gap after each): a view's pointer (and any pointer into a block) leads
  // back to its buffer and element offset.
  struct Block {
    cl_mem memory;
    std::size_t bytes;
  };
  std::map<std::uintptr_t, Block> blocks;
  std::uintptr_t next = std::uintptr_t{1} << 44;
  std::mutex mutex;

  ~State() {
    for (auto& [text, c] : programs) {
      clReleaseKernel(c.kernel);
      clReleaseProgram(c.program);
    }
    for (auto& [base, b] : blocks) clReleaseMemObject(b.memory);
    for (cl_kernel k : matmul)
      if (k) clReleaseKernel(k);
    if (indexOf) clReleaseKernel(indexOf);
    if (fixed) clReleaseProgram(fixed);
    if (fault) clReleaseMemObject(fault);
    if (empty) clReleaseMemObject(empty);
    if (queue) clReleaseCommandQueue(queue);
    if (context) clReleaseContext(context);
  }

  // The buffer and element offset behind a device address (null: an empty view).
  Result<std::pair<cl_mem, Index>> resolve(const void* p) {
    if (!p) return std::pair<cl_mem, Index>{empty, 0};
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    auto it = blocks.upper_bound(address);
    if (it == blocks.begin()) return Error{fmt::format("opencl: address {} is no device memory", p)};
    --it;
    if (address >= it->first + it->second.bytes + sizeof(Scalar))
      return Error{fmt::format("opencl: address {} is no device memory", p)};
    return std::pair<cl_mem, Index>{it->second.memory, static_cast<Index>((address - it->first) / sizeof(Scalar))};
  }

  Result<cl_program> build(const std::string& source, const std::string& what) {
    const char* text = source.c_str();
    const std::size_t length = source.size();
    cl_int err = CL_SUCCESS;
    cl_program program = clCreateProgramWithSource(context, 1, &text, &length, &err);
    if (err != CL_SUCCESS) return clError(fmt::format("creating the program of {}", what), err);
    err = clBuildProgram(program, 1, &device, kBuildOptions, nullptr, nullptr);
    if (err != CL_SUCCESS) {
      std::size_t size = 0;
      clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
      std::string log(size, '\0');
      clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
      log.resize(std::strlen(log.c_str()));  // the size counted the C string's terminating NUL
      clReleaseProgram(program);
      return Error{fmt::format("opencl: {} cannot be compiled by {} ({}); build log:\n{}\nsource:\n{}", what, name,
                               errorName(err), log, source)};
    }
    return program;
  }

  // Reads and clears the fault slot: the first strict fault of the launches since the last read.
  Result<void> takeFault(const std::string& what) {
    long long slot[3] = {0, 0, 0};
    cl_int err = clEnqueueReadBuffer(queue, fault, CL_TRUE, 0, sizeof slot, slot, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) return clError(fmt::format("running {}", what), err);
    const int kind = static_cast<int>(slot[0] & 0xffffffff);
    if (kind == 0) return {};
    const long long zero[3] = {0, 0, 0};
    clEnqueueWriteBuffer(queue, fault, CL_TRUE, 0, sizeof zero, zero, 0, nullptr, nullptr);
    return Error{describeFault(static_cast<FaultKind>(kind), slot[1], slot[2])};
  }
};

namespace {
// What `kernel` may be launched with on `device` (a limit left 0 where its query fails).
opencl_detail::WorkGroupLimits workGroupLimits(cl_kernel kernel, cl_device_id device) {
  opencl_detail::WorkGroupLimits limits;
  if (clGetKernelWorkGroupInfo(kernel, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof limits.kernel, &limits.kernel,
                               nullptr) != CL_SUCCESS)
    limits.kernel = 0;
  std::size_t items[3] = {0, 0, 0};  // every OpenCL device has at least three dimensions
  if (clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, nullptr) == CL_SUCCESS) {
    limits.items[0] = items[0];
    limits.items[1] = items[1];
  }
  return limits;
}
}  // namespace

Result<std::shared_ptr<OpenClDevice>> OpenClDevice::open() {
  static std::mutex opening;
  static std::weak_ptr<OpenClDevice> opened;
  std::lock_guard lock(opening);
  if (auto existing = opened.lock()) return existing;

  const opencl_detail::ChosenDevice pick = OSPREY_TRY(opencl_detail::chooseDevice());
  auto state = std::make_unique<State>();
  state->platform = pick.platform;
  state->device = pick.device;
  state->name = pick.name;
  std::size_t maxArguments = 0;
  if (clGetDeviceInfo(pick.device, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof maxArguments, &maxArguments, nullptr) ==
          CL_SUCCESS &&
      maxArguments >= 256)
    state->maxArgumentBytes = maxArguments;
  cl_int err = CL_SUCCESS;
  state->context = clCreateContext(nullptr, 1, &pick.device, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return clError("creating a context", err);
  state->queue = clCreateCommandQueue(state->context, pick.device, 0, &err);
  if (err != CL_SUCCESS) return clError("creating a command queue", err);
  const long long zero[3] = {0, 0, 0};
  state->fault = clCreateBuffer(state->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero,
                                const_cast<long long*>(zero), &err);
  if (err != CL_SUCCESS) return clError("allocating the fault slot", err);
  state->empty = clCreateBuffer(state->context, CL_MEM_READ_WRITE, sizeof(Scalar), nullptr, &err);
  if (err != CL_SUCCESS) return clError("allocating", err);
  state->fixed = OSPREY_TRY(
      state->build(trace::openClPrelude() + kFixedKernels + kMatMulKernels, "the product and search kernels"));
  static_assert(std::size(opencl_detail::kMatMulKernelNames) == opencl_detail::kMatMulKernelCount);
  for (std::size_t i = 0; i < opencl_detail::kMatMulKernelCount; ++i) {
    state->matmul[i] = clCreateKernel(state->fixed, opencl_detail::kMatMulKernelNames[i], &err);
    if (err != CL_SUCCESS)
      return clError(fmt::format("creating the product kernel {}", opencl_detail::kMatMulKernelNames[i]), err);
    state->matmulLimits[i] = workGroupLimits(state->matmul[i], pick.device);
  }
  state->indexOf = clCreateKernel(state->fixed, "osprey_index_of", &err);
  if (err != CL_SUCCESS) return clError("creating the search kernel", err);

  std::shared_ptr<OpenClDevice> device(new OpenClDevice(std::move(state)));
  opened = device;
  return device;
}

OpenClDevice::OpenClDevice(std::unique_ptr<State> state) : m(std::move(state)) {}
OpenClDevice::~OpenClDevice() = default;

std::string OpenClDevice::name() const { return m->name; }

std::size_t OpenClDevice::compiledPrograms() const {
  std::lock_guard lock(m->mutex);
  return m->programs.size();
}

Result<Scalar*> OpenClDevice::allocate(Index n) {
  if (n == 0) return static_cast<Scalar*>(nullptr);
  if (n < 0 || static_cast<std::uint64_t>(n) > (std::uint64_t{1} << 40) / sizeof(Scalar))
    return Error{fmt::format("opencl: cannot allocate {} elements", n)};
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(Scalar);
  cl_int err = CL_SUCCESS;
  cl_mem memory = clCreateBuffer(m->context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  if (err != CL_SUCCESS) return clError(fmt::format("allocating {} bytes", bytes), err);
  std::lock_guard lock(m->mutex);
  const std::uintptr_t base = m->next;
  constexpr std::uintptr_t kAlign = 4096;
  m->next += (bytes + kAlign) / kAlign * kAlign + kAlign;
  m->blocks.emplace(base, State::Block{memory, bytes});
  return reinterpret_cast<Scalar*>(base);
}

void OpenClDevice::release(Scalar* p) {
  if (!p) return;
  std::lock_guard lock(m->mutex);
  auto it = m->blocks.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == m->blocks.end()) return;
  clReleaseMemObject(it->second.memory);
  m->blocks.erase(it);
}

// n elements between the host at `host` and the device at `device`, in the direction `toDevice` says.
Result<void> OpenClDevice::copy(const Scalar* device, Scalar* host, Index n, bool toDevice) {
  if (n == 0) return {};
  std::lock_guard lock(m->mutex);
  const auto [memory, offset] = OSPREY_TRY(m->resolve(device));
  const std::size_t at = static_cast<std::size_t>(offset) * sizeof(Scalar), bytes = static_cast<std::size_t>(n) * sizeof(Scalar);
  const cl_int err = toDevice ? clEnqueueWriteBuffer(m->queue, memory, CL_TRUE, at, bytes, host, 0, nullptr, nullptr)
                              : clEnqueueReadBuffer(m->queue, memory, CL_TRUE, at, bytes, host, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) return clError(toDevice ? "copying to the device" : "copying from the device", err);
  return {};
}

Result<void> OpenClDevice::upload(Scalar* dst, const Scalar* src, Index n) {
  return copy(dst, const_cast<Scalar*>(src), n, true);  // written from, never to
}

Result<void> OpenClDevice::download(Scalar* dst, const Scalar* src, Index n) { return copy(src, dst, n, false); }

Result<Scalar> OpenClDevice::readOne(const Scalar* p) {
  Scalar x = 0.0;
  OSPREY_CHECK(download(&x, p, 1));
  return x;
}

namespace {
template <class T>
cl_int setArg(cl_kernel k, cl_uint& index, const T& value) {
  return clSetKernelArg(k, index++, sizeof(T), &value);
}
}  // namespace

Result<void> OpenClDevice::launch(const trace::Graph& graph, int result, trace::Shape shape, Scalar* out, Index n,
                                  const std::string& kernel) {
  // The arguments' bytes: out, its offset, n and the fault slot; a pointer and an offset a view; a
  // constant each. Past what the device takes, the constants go in a buffer instead.
  const std::size_t argumentBytes = 8 * (4 + 2 * graph.views().size() + graph.constants().size());
  const bool inBuffer = argumentBytes > m->maxArgumentBytes;
  std::string source;
  try {
    source = trace::openClKernel(graph, result, shape, inBuffer ? trace::Constants::Buffer : trace::Constants::Arguments);
  } catch (const std::exception& e) {
    return Error{fmt::format("opencl: kernel {} cannot be traced: {}", kernel, e.what())};
  }
  std::lock_guard lock(m->mutex);
  auto found = m->programs.find(source);
  if (found == m->programs.end()) {
    cl_program program =
        OSPREY_TRY(m->build(trace::openClPrelude() + "\n" + source, fmt::format("kernel {}", kernel)));
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(program, trace::kKernelName, &err);
    if (err != CL_SUCCESS) {
      clReleaseProgram(program);
      return clError(fmt::format("creating kernel {}", kernel), err);
    }
    found = m->programs.emplace(source, State::Compiled{program, k}).first;
  }
  cl_kernel k = found->second.kernel;
  const auto [outMemory, outOffset] = OSPREY_TRY(m->resolve(out));
  cl_uint arg = 0;
  cl_int err = setArg(k, arg, outMemory);
  err |= setArg(k, arg, static_cast<cl_long>(outOffset));
  err |= setArg(k, arg, static_cast<cl_long>(n));
  err |= setArg(k, arg, m->fault);
  for (const auto& view : graph.views()) {
    const auto [memory, offset] = OSPREY_TRY(m->resolve(view.data));
    err |= setArg(k, arg, memory);
    err |= setArg(k, arg, static_cast<cl_long>(offset));
  }
  cl_mem constants = nullptr;
  if (!inBuffer) {
    for (const auto& constant : graph.constants()) err |= setArg(k, arg, constant.bits);  // a double's bits or a long
  } else if (!graph.constants().empty()) {
    std::vector<cl_ulong> bits;
    for (const auto& constant : graph.constants()) bits.push_back(constant.bits);
    cl_int made = CL_SUCCESS;
    constants = clCreateBuffer(m->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bits.size() * sizeof(cl_ulong),
                               bits.data(), &made);
    if (made != CL_SUCCESS) return clError(fmt::format("passing the constants of kernel {}", kernel), made);
    err |= setArg(k, arg, constants);
  }
  if (err != CL_SUCCESS) {
    if (constants) clReleaseMemObject(constants);
    return clError(fmt::format("passing the arguments of kernel {}", kernel), err);
  }
  const std::size_t global = shape == trace::Shape::EachIndex ? static_cast<std::size_t>(n) : 1;
  err = clEnqueueNDRangeKernel(m->queue, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr);
  if (constants) clReleaseMemObject(constants);  // the queued launch keeps it until it has run
  if (err != CL_SUCCESS) return clError(fmt::format("launching kernel {}", kernel), err);
  return m->takeFault(fmt::format("kernel {}", kernel));
}

Result<Scalar> OpenClDevice::foldResult(const trace::Graph& graph, int result, const std::string& kernel) {
  auto out = OSPREY_TRY(allocate(1));
  auto launched = launch(graph, result, trace::Shape::Single, out, 1, kernel);
  Result<Scalar> value = launched.ok() ? readOne(out) : Result<Scalar>(launched.error());
  release(out);
  return value;
}

Result<Index> OpenClDevice::indexOf(View v, Scalar x) {
  if (v.n == 0) return Index{0};
  constexpr Index kChunks = 1024;
  const Index chunks = std::min(v.n, kChunks);
  const Index chunk = (v.n + chunks - 1) / chunks;
  std::vector<cl_long> firsts(static_cast<std::size_t>(chunks));
  std::lock_guard lock(m->mutex);
  const auto [memory, offset] = OSPREY_TRY(m->resolve(v.data));
  cl_int err = CL_SUCCESS;
  cl_mem out = clCreateBuffer(m->context, CL_MEM_WRITE_ONLY, firsts.size() * sizeof(cl_long), nullptr, &err);
  if (err != CL_SUCCESS) return clError("allocating the search's results", err);
  cl_uint arg = 0;
  err = setArg(m->indexOf, arg, out);
  err |= setArg(m->indexOf, arg, memory);
  err |= setArg(m->indexOf, arg, static_cast<cl_long>(offset));
  err |= setArg(m->indexOf, arg, static_cast<cl_long>(v.n));
  err |= setArg(m->indexOf, arg, x);
  err |= setArg(m->indexOf, arg, static_cast<cl_long>(chunk));
  const std::size_t global = static_cast<std::size_t>(chunks);
  if (err == CL_SUCCESS) err = clEnqueueNDRangeKernel(m->queue, m->indexOf, 1, nullptr, &global, nullptr, 0, nullptr, nullptr);
  if (err == CL_SUCCESS)
    err = clEnqueueReadBuffer(m->queue, out, CL_TRUE, 0, firsts.size() * sizeof(cl_long), firsts.data(), 0, nullptr, nullptr);
  clReleaseMemObject(out);
  if (err != CL_SUCCESS) return clError("indexOf", err);
  return static_cast<Index>(*std::min_element(firsts.begin(), firsts.end()));
}

Result<void> OpenClDevice::matMul(Scalar* out, View a, View b, Index rows, Index inner, Index cols) {
  if (rows == 0 || cols == 0) return {};
  std::lock_guard lock(m->mutex);
  const auto [outMemory, outOffset] = OSPREY_TRY(m->resolve(out));
  const auto [aMemory, aOffset] = OSPREY_TRY(m->resolve(a.data));
  const auto [bMemory, bOffset] = OSPREY_TRY(m->resolve(b.data));
  const opencl_detail::MatMulPlan plan = opencl_detail::planMatMul(rows, cols, m->matmulLimits);
  cl_kernel k = m->matmul[opencl_detail::slotOf(plan.kernel)];
  cl_uint arg = 0;
  cl_int err = setArg(k, arg, outMemory);
  err |= setArg(k, arg, static_cast<cl_long>(outOffset));
  err |= setArg(k, arg, aMemory);
  err |= setArg(k, arg, static_cast<cl_long>(aOffset));
  err |= setArg(k, arg, bMemory);
  err |= setArg(k, arg, static_cast<cl_long>(bOffset));
  err |= setArg(k, arg, static_cast<cl_long>(rows));
  err |= setArg(k, arg, static_cast<cl_long>(inner));
  err |= setArg(k, arg, static_cast<cl_long>(cols));
  const std::size_t* local = plan.local[0] == 0 ? nullptr : plan.local;
  if (err == CL_SUCCESS) err = clEnqueueNDRangeKernel(m->queue, k, 2, nullptr, plan.global, local, 0, nullptr, nullptr);
  if (err == CL_SUCCESS) err = clFinish(m->queue);
  if (err != CL_SUCCESS)
    return clError(fmt::format("matMul {}x{}x{} (work-group {}x{})", rows, inner, cols, plan.local[0], plan.local[1]),
                   err);
  return {};
}

}  // namespace osprey
