// The boundary: `under(name, work)` is the only place a name becomes a handler, and OSPREY_GPU
// picks the gpu handler's device. A bad name runs nothing; a device that cannot be had is an
// error naming it, never a silent run somewhere else (DESIGN.md §3).
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "osprey/under.hpp"

namespace osprey {
namespace {

// Sets (or unsets) OSPREY_GPU for one test and puts the old value back afterwards.
class GpuEnvironment {
 public:
  explicit GpuEnvironment(const char* value) {
    if (const char* old = std::getenv("OSPREY_GPU")) m_old = old;
    if (value)
      ::setenv("OSPREY_GPU", value, 1);
    else
      ::unsetenv("OSPREY_GPU");
  }
  ~GpuEnvironment() {
    if (m_old)
      ::setenv("OSPREY_GPU", m_old->c_str(), 1);
    else
      ::unsetenv("OSPREY_GPU");
  }
  GpuEnvironment(const GpuEnvironment&) = delete;
  GpuEnvironment& operator=(const GpuEnvironment&) = delete;

 private:
  std::optional<std::string> m_old;
};

// Work that records that it ran and answers the handler's device name.
struct NameTheDevice {
  int* runs;
  template <class H>
  Result<std::string> operator()(H& h) const {
    ++*runs;
    return h.device();
  }
};

TEST(Boundary, UnknownBackendRunsNothing) {
  int runs = 0;
  auto r = under("tpu", NameTheDevice{&runs});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "unknown backend `tpu`: choose gpu, fast or lists");
  EXPECT_EQ(runs, 0);
}

// This binary is built by the host compiler: the fast handler lives on the cuda device, so asking
// for it is an error that says why, and nothing runs elsewhere instead.
TEST(Boundary, FastWithoutNvccRunsNothing) {
  int runs = 0;
  auto r = under("fast", NameTheDevice{&runs});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("backend `fast` runs on a CUDA device"), std::string::npos) << r.error().message;
  EXPECT_EQ(runs, 0);
}

TEST(Boundary, NamesAreExact) {
  for (const char* name : {"", "Lists", "GPU", "lists ", "host", "cuda"}) {
    SCOPED_TRACE(name);
    int runs = 0;
    auto r = under(name, NameTheDevice{&runs});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, std::string("unknown backend `") + name + "`: choose gpu, fast or lists");
    EXPECT_EQ(runs, 0);
  }
}

TEST(Boundary, ListsRunsOnLists) {
  int runs = 0;
  auto r = under("lists", NameTheDevice{&runs});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "lists");
  EXPECT_EQ(runs, 1);
}

TEST(Boundary, GpuDefaultsToTheHostDevice) {
  GpuEnvironment env(nullptr);
  int runs = 0;
  auto r = under("gpu", NameTheDevice{&runs});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "host");
  EXPECT_EQ(runs, 1);
}

TEST(Boundary, GpuHostByEnvironment) {
  GpuEnvironment env("host");
  int runs = 0;
  auto r = under("gpu", NameTheDevice{&runs});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "host");
}

TEST(Boundary, BogusGpuDeviceIsAnErrorNamingIt) {
  GpuEnvironment env("bogus");
  int runs = 0;
  auto r = under("gpu", NameTheDevice{&runs});
  ASSERT_FALSE(r.ok()) << "ran on " << *r;
  EXPECT_NE(r.error().message.find("bogus"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("OSPREY_GPU"), std::string::npos) << r.error().message;
  EXPECT_EQ(runs, 0);
}

// This unit is built by the host compiler: it cannot reach a CUDA device, and must say so
// instead of quietly running the work on the CPU.
TEST(Boundary, CudaFromAHostCompiledUnitIsAnErrorNamingCuda) {
  GpuEnvironment env("cuda");
  int runs = 0;
  auto r = under("gpu", NameTheDevice{&runs});
  ASSERT_FALSE(r.ok()) << "silently ran on " << *r;
  EXPECT_NE(r.error().message.find("cuda"), std::string::npos) << r.error().message;
  EXPECT_EQ(runs, 0);
}

TEST(Boundary, ListsIgnoresOspreyGpu) {
  GpuEnvironment env("bogus");
  int runs = 0;
  auto r = under("lists", NameTheDevice{&runs});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "lists");
}

// The boundary installs strictly: a fault in the work is the run's error, on either handler.
struct FaultingWork {
  bool* after;
  template <class H>
  Result<std::string> operator()(H& h) const {
    Int tokens = std::numeric_limits<Index>::max();
    Int next = tokens + Int(1);
    *after = true;
    return h.device() + std::to_string(next.raw());
  }
};

TEST(Boundary, UnderRunsTheWorkStrictly) {
  GpuEnvironment env("host");
  for (const char* name : {"lists", "gpu"}) {
    SCOPED_TRACE(name);
    bool after = false;
    auto r = under(name, FaultingWork{&after});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "integer overflow: 9223372036854775807 + 1");
    EXPECT_FALSE(after);
  }
}

// chooseBackend is where every choice is made and every refusal worded: the CLI's --backend and
// --device go through it too (tests/gpt2/cli_test.cpp sees the same words).
TEST(Boundary, ChooseBackendNamesEachHandlerAndEachRefusal) {
  GpuEnvironment env(nullptr);
  const auto chosen = [](std::string_view b, std::string_view d, bool cuda) {
    auto r = chooseBackend(b, d, cuda);
    return r.ok() ? std::optional<Backend>(*r) : std::nullopt;
  };
  EXPECT_EQ(chosen("lists", "", false), Backend::Lists);
  EXPECT_EQ(chosen("gpu", "", false), Backend::GpuHost);
  EXPECT_EQ(chosen("gpu", "host", true), Backend::GpuHost);
  EXPECT_EQ(chosen("gpu", "cuda", true), Backend::GpuCuda);
  EXPECT_EQ(chosen("fast", "", true), Backend::Fast);
  EXPECT_EQ(chosen("fast", "cuda", true), Backend::Fast);

  const auto refusal = [](std::string_view b, std::string_view d, bool cuda) {
    auto r = chooseBackend(b, d, cuda);
    return r.ok() ? std::string("(chosen)") : r.error().message;
  };
  EXPECT_EQ(refusal("lists", "host", true), "device `host` applies to the gpu backend; the lists backend runs on the host");
  EXPECT_EQ(refusal("fast", "host", true).rfind("device `host`: the fast backend runs on the cuda device only", 0), 0u);
  EXPECT_EQ(refusal("fast", "", false).rfind("backend `fast` runs on a CUDA device: this program was built without nvcc", 0), 0u);
  EXPECT_EQ(refusal("gpu", "cuda", false).rfind("gpu device `cuda`: this program was built without nvcc", 0), 0u);
  EXPECT_EQ(refusal("gpu", "metal", true), "unknown gpu device `metal`: choose host, cuda or opencl");
  // The opencl device where the program links it (osprey_opencl), a refusal naming why elsewhere.
  EXPECT_EQ(refusal("gpu", "opencl", true).rfind("gpu device `opencl`: this program was built without the OpenCL", 0), 0u);
  {
    const auto withOpenCl = chooseBackend("gpu", "opencl", false, true);
    ASSERT_TRUE(withOpenCl.ok()) << withOpenCl.error().message;
    EXPECT_EQ(*withOpenCl, Backend::GpuOpenCl);
  }
  EXPECT_EQ(refusal("tpu", "", true), "unknown backend `tpu`: choose gpu, fast or lists");
  {
    GpuEnvironment cuda("cuda");
    EXPECT_EQ(chosen("gpu", "", true), Backend::GpuCuda);
    EXPECT_EQ(refusal("gpu", "", false).rfind("gpu device `cuda`: this program was built without nvcc", 0), 0u);
  }
  GpuEnvironment bad("vulkan");
  EXPECT_EQ(refusal("gpu", "", true), "unknown gpu device `vulkan` (OSPREY_GPU): choose host, cuda or opencl");
}

// Host-compiled code cannot reach the cuda device: onGpuCuda says so and runs nothing.
TEST(Boundary, GpuCudaWithoutNvccRunsNothing) {
  int runs = 0;
  auto r = onGpuCuda(NameTheDevice{&runs});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("built without nvcc"), std::string::npos) << r.error().message;
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace osprey
