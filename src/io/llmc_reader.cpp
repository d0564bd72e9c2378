// Reading llm.c checkpoints as Hugging Face GPT-2 tensors (see llmc_checkpoint.hpp).
#include <fmt/format.h>

#include "osprey/io/llmc_checkpoint.hpp"

namespace osprey::io {
namespace {

std::int32_t headerInt(const unsigned char* header, std::size_t k) {
  const unsigned char* p = header + 4 * k;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
                                   (static_cast<std::uint32_t>(p[2]) << 16) |
                                   (static_cast<std::uint32_t>(p[3]) << 24));
}

Error noSuchTensor(const std::string& path, std::string_view name, const LlmcConfig& config) {
  return fileError(path, fmt::format("no tensor named `{}` (an llm.c checkpoint holds wte.weight, wpe.weight, "
                                     "h.0.* .. h.{}.* and ln_f.*, under Hugging Face GPT-2 names)",
                                     name, config.L - 1));
}

}  // namespace

Result<LlmcCheckpoint> LlmcCheckpoint::open(const std::string& path) {
  InputFile file = OSPREY_TRY(InputFile::open(path));
  if (file.size() < kLlmcHeaderBytes) {
    return fileError(path, fmt::format("file is {} bytes, shorter than the {}-byte llm.c header", file.size(),
                                       kLlmcHeaderBytes));
  }
  unsigned char header[kLlmcHeaderBytes];
  OSPREY_CHECK(file.readAt(0, kLlmcHeaderBytes, header));
  const std::int32_t magic = headerInt(header, 0);
  if (magic != kLlmcMagic) {
    return fileError(path, fmt::format("not an llm.c checkpoint: bad magic number {} (expected {})", magic,
                                       kLlmcMagic));
  }
  const std::int32_t version = headerInt(header, 1);
  if (version != kLlmcVersionF32 && version != kLlmcVersionBF16) {
    return fileError(path, fmt::format("unsupported llm.c checkpoint version {} (Osprey reads {} = float32 and "
                                       "{} = bfloat16, with the padded vocabulary)",
                                       version, kLlmcVersionF32, kLlmcVersionBF16));
  }
  const LlmcConfig config{headerInt(header, 2), headerInt(header, 3), headerInt(header, 4),
                          headerInt(header, 5), headerInt(header, 6), headerInt(header, 7)};
  OSPREY_CHECK(checkLlmcConfig(path, config));

  // The limits in checkLlmcConfig keep this product far below 2^64.
  const std::uint64_t elementBytes = version == kLlmcVersionBF16 ? 2 : 4;
  const std::uint64_t expected = kLlmcHeaderBytes + llmcParameterCount(config) * elementBytes;
  if (file.size() < expected) {
    return fileError(path, fmt::format("truncated: the header's shapes need {} bytes, the file has {}", expected,
                                       file.size()));
  }
  if (file.size() > expected) {
    return fileError(path, fmt::format("has {} bytes, {} more than the header's shapes need ({})", file.size(),
                                       file.size() - expected, expected));
  }
  return LlmcCheckpoint(std::move(file), config, version);
}

Result<TensorInfo> LlmcCheckpoint::info(std::string_view name) const {
  const std::optional<LlmcSlice> slice = llmcSlice(m_config, name);
  if (!slice) return noSuchTensor(path(), name, m_config);
  const std::uint64_t elementBytes = dtypeBytes(dtype());
  TensorInfo info;
  info.name = std::string(name);
  info.dtype = dtype();
  info.shape = slice->hfShape;
  info.begin = slice->firstElement * elementBytes;
  info.end = info.begin + slice->elementCount * elementBytes;
  return info;
}

Result<TensorData> LlmcCheckpoint::read(std::string_view name) const {
  const std::optional<LlmcSlice> slice = llmcSlice(m_config, name);
  if (!slice) return noSuchTensor(path(), name, m_config);
  const std::uint64_t elementBytes = dtypeBytes(dtype());
  std::vector<unsigned char> bytes(slice->elementCount * elementBytes);
  OSPREY_CHECK(m_file.readAt(kLlmcHeaderBytes + slice->firstElement * elementBytes, bytes.size(), bytes.data()));

  TensorData data;
  data.shape = slice->hfShape;
  data.values.resize(slice->elementCount);
  if (!slice->transposed) {
    decodeValues(dtype(), bytes.data(), data.values.size(), data.values.data());
    return data;
  }
  // llm.c holds (out, in) = (shape[1], shape[0]); Hugging Face wants (in, out).
  std::vector<Scalar> linear(slice->elementCount);  // (out, in)
  decodeValues(dtype(), bytes.data(), linear.size(), linear.data());
  const auto in = static_cast<std::size_t>(slice->hfShape[0]);
  const auto out = static_cast<std::size_t>(slice->hfShape[1]);
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t i = 0; i < in; ++i) data.values[i * out + o] = linear[o * in + i];
  }
  return data;
}

}  // namespace osprey::io
