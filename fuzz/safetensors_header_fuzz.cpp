// libFuzzer target: arbitrary bytes as a whole safetensors file.
//
// The parser must never crash, hang or read out of bounds (AddressSanitizer and UBSan watch);
// a file it accepts must keep the promises readers rely on, and a file it refuses must be
// refused with a message naming the file. A broken promise aborts, which the fuzzer reports.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "osprey/io/safetensors.hpp"

namespace {

const std::string kLabel = "fuzz.safetensors";

void require(bool promise) {
  if (!promise) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace osprey::io;
  const std::span<const unsigned char> bytes(data, size);
  auto header = parseSafetensorsBytes(kLabel, bytes);
  if (!header.ok()) {
    require(header.error().message.rfind(kLabel + ": ", 0) == 0);
    return 0;
  }
  require(header->dataStart + header->dataBytes == size);
  // The tensors tile the data section: with no overlap (checked pairwise by the reader), their
  // sizes add up to it exactly, so no byte is left that no tensor covers.
  std::uint64_t covered = 0;
  for (const TensorInfo& info : header->tensors) covered += info.end - info.begin;
  require(covered == header->dataBytes);
  for (std::size_t k = 0; k < header->tensors.size(); ++k) {
    const TensorInfo& info = header->tensors[k];
    require(k == 0 || header->tensors[k - 1].name < info.name);
    require(info.begin <= info.end && info.end <= header->dataBytes);
    require(info.end - info.begin == static_cast<std::uint64_t>(info.elementCount()) * dtypeBytes(info.dtype));
    require(header->find(info.name) == &info);
    const auto tensorBytes = bytes.subspan(header->dataStart + info.begin, info.end - info.begin);
    auto tensor = decodeTensor(kLabel, info, tensorBytes);
    if (dtypeReadable(info.dtype)) {
      require(tensor.ok());
      require(tensor->shape == info.shape);
      require(tensor->values.size() == static_cast<std::size_t>(info.elementCount()));
    } else {
      require(!tensor.ok());
    }
  }
  return 0;
}
