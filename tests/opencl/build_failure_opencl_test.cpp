// A program the device's OpenCL compiler rejects stops the launch: the error names the kernel
// (demangled), carries the compiler's build log and the program's source, and nothing is cached
// for it, so the next launch of the same kernel is compiled, and rejected, again.
//
// The rejected program comes through the launch path every kernel takes (build -> forEach ->
// trace -> emit -> compile): the kernel appends to its own trace a node the traced operators never
// record, `&` on two doubles (Idx's `&` records it on int64 values only), which the emitter writes
// as it writes every binary operation and which OpenCL C, like C, does not allow.
#include <string>

#include <gtest/gtest.h>

#include "handlers.hpp"

namespace osprey::testing {
namespace {

struct BitAndOfDoubles {
  trace::Num operator()(trace::Idx i) const {
    const trace::Num x = trace::toScalarTraced(i);
    return {trace::detail::FromNode{},
            trace::detail::node(trace::Op::BitAnd, trace::Kind::F64, x.id, x.id)};
  }
};

// The part of a build failure's message between "build log:" and the source that follows it.
std::string buildLogOf(const std::string& message) {
  const std::size_t from = message.find("build log:\n");
  const std::size_t to = message.find("\nsource:\n");
  if (from == std::string::npos || to == std::string::npos || to < from) return {};
  return message.substr(from, to - from);
}

TEST(OpenClBuildFailure, StopsTheLaunchNamingTheKernelWithTheBuildLogAndCachesNothing) {
  auto device = OpenClDevice::open();
  ASSERT_TRUE(device.ok()) << device.error().message;
  GpuOpenCl h(*device);
  const std::size_t compiledBefore = (*device)->compiledPrograms();

  auto first = h.build(7, BitAndOfDoubles{});
  ASSERT_FALSE(first.ok()) << "the compiler accepted `&` on two doubles";
  const std::string& message = first.error().message;
  EXPECT_NE(message.find("kernel osprey::testing::(anonymous namespace)::BitAndOfDoubles cannot be compiled by " +
                         (*device)->name()),
            std::string::npos)
      << message;
  const std::string log = buildLogOf(message);
  EXPECT_NE(log.find("error:"), std::string::npos) << "no compiler error in the build log:\n" << message;
  EXPECT_EQ(message.find('\0'), std::string::npos) << "the log's terminating NUL is part of the message";
  EXPECT_NE(message.find("__kernel void " + std::string(trace::kKernelName)), std::string::npos) << message;
  EXPECT_NE(message.find(" & "), std::string::npos) << "the rejected operation is not in the source shown:\n" << message;
  EXPECT_EQ((*device)->compiledPrograms(), compiledBefore);

  // Compiled and rejected again: the same words and source, a log of its own (PoCL's names the
  // temporary file it compiled).
  auto second = h.build(7, BitAndOfDoubles{});
  ASSERT_FALSE(second.ok());
  const std::string& again = second.error().message;
  EXPECT_EQ(again.substr(0, again.find("build log:")), message.substr(0, message.find("build log:")));
  EXPECT_EQ(again.substr(again.find("\nsource:\n")), message.substr(message.find("\nsource:\n")));
  EXPECT_NE(buildLogOf(again).find("error:"), std::string::npos) << again;
  EXPECT_EQ((*device)->compiledPrograms(), compiledBefore);
}

// After a rejected program the device runs the next kernel as before.
TEST(OpenClBuildFailure, TheDeviceRunsOnAfterARejectedProgram) {
  auto h = makeHandler<GpuOpenCl>();
  ASSERT_FALSE(h.build(3, BitAndOfDoubles{}).ok());
  auto y = h.build(3, [](trace::Idx i) -> trace::Num { return trace::toScalarTraced(i) * 2.0 + 0.5; });
  ASSERT_TRUE(y.ok()) << y.error().message;
  EXPECT_SAME_BITS(readAll(h, *y), (std::vector<Scalar>{0.5, 2.5, 4.5}));
}

}  // namespace
}  // namespace osprey::testing
